package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"

	"github.com/quorate/quorate/server/httpapi"
)

// apiFlags are serve's flags for the HTTP API's security (README
// "Security", DESIGN §7 "API security").
type apiFlags struct {
	authFile string
	tlsCert  string
	tlsKey   string
}

func (a *apiFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&a.authFile, "auth-file", "", `JSON file of API tokens: {"tokens":[{"name","role","sha256"}]} (quorate token new writes entries); reloaded on SIGHUP. Without it the API needs no token and serves only on a loopback --http-addr`)
	fs.StringVar(&a.tlsCert, "http-tls-cert", "", "PEM certificate (chain) for HTTPS on --http-addr; with --http-tls-key; reloaded on SIGHUP")
	fs.StringVar(&a.tlsKey, "http-tls-key", "", "PEM private key of --http-tls-cert")
}

// apiSecurity is what serve needs to serve the API as the flags say.
type apiSecurity struct {
	flags apiFlags
	// auth is nil without --auth-file.
	auth *httpapi.Authenticator
	// tls is nil without --http-tls-cert.
	tls *tls.Config
	// cert is the certificate tls presents; reload replaces it.
	cert atomic.Pointer[tls.Certificate]
}

// newAPISecurity checks the API's security flags and loads the auth file
// and certificate. Without --auth-file it refuses a --http-addr that is not
// loopback unless insecure is set; with insecure it warns, at every start,
// about what is off. It runs before the node touches its data dir.
func newAPISecurity(f apiFlags, httpAddr string, insecure bool, logger *slog.Logger) (*apiSecurity, error) {
	s := &apiSecurity{flags: f}
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return nil, usageError{errors.New("--http-tls-cert and --http-tls-key go together")}
	}
	loopback := loopbackAddr(httpAddr)
	if f.authFile != "" {
		af, err := httpapi.ReadAuthFile(f.authFile)
		if err != nil {
			return nil, err
		}
		if s.auth, err = httpapi.NewAuthenticator(af); err != nil {
			return nil, err
		}
	} else if !loopback && !insecure {
		return nil, usageError{fmt.Errorf("--http-addr %s is not a loopback address, and the API would answer anyone who can reach it: "+
			"give --auth-file (tokens: quorate token new), or --insecure to run without protection", httpAddr)}
	}
	if f.tlsCert != "" {
		if err := s.loadCert(); err != nil {
			return nil, err
		}
		s.tls = &tls.Config{
			MinVersion: tls.VersionTLS12,
			GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
				return s.cert.Load(), nil
			},
		}
	}
	if insecure {
		api := "tokens required"
		if s.auth == nil {
			api = "no token required, Host not checked: anyone who reaches " + httpAddr + " may change limits and stop the node"
		}
		logger.Warn("INSECURE: started with --insecure, which lets this node run without the protections it would otherwise insist on (README, Security)",
			"http_api", api)
	}
	if s.auth != nil && s.tls == nil && !loopback {
		logger.Warn("API tokens cross the network in clear text: give --http-tls-cert and --http-tls-key", "http", httpAddr)
	}
	return s, nil
}

// options are the httpapi.Options fields the flags decide: tokens if there
// are any; otherwise, unless insecure, only loopback Host headers.
func (s *apiSecurity) options(opts httpapi.Options, insecure bool) httpapi.Options {
	opts.Auth = s.auth
	opts.LoopbackHostOnly = s.auth == nil && !insecure
	return opts
}

func (s *apiSecurity) loadCert() error {
	cert, err := tls.LoadX509KeyPair(s.flags.tlsCert, s.flags.tlsKey)
	if err != nil {
		return fmt.Errorf("--http-tls-cert/--http-tls-key: %w", err)
	}
	s.cert.Store(&cert)
	return nil
}

// reload re-reads the auth file and the certificate. What fails to load is
// kept as it was, and logged.
func (s *apiSecurity) reload(logger *slog.Logger) {
	if s.auth != nil {
		af, err := httpapi.ReadAuthFile(s.flags.authFile)
		if err == nil {
			err = s.auth.Replace(af)
		}
		if err != nil {
			logger.Error("reloading the auth file; keeping the tokens loaded before", "err", err)
		} else {
			logger.Info("auth file reloaded", "file", s.flags.authFile, "tokens", len(af.Tokens))
		}
	}
	if s.tls != nil {
		if err := s.loadCert(); err != nil {
			logger.Error("reloading the HTTPS certificate; keeping the one loaded before", "err", err)
		} else {
			logger.Info("HTTPS certificate reloaded", "cert", s.flags.tlsCert)
		}
	}
}

// reloadOnHangup reloads on every SIGHUP until stop is called.
func (s *apiSecurity) reloadOnHangup(logger *slog.Logger) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-hup:
				s.reload(logger)
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		close(done)
	}
}

// loopbackAddr reports whether a host:port listens on loopback only: a
// loopback IP or "localhost" (an empty host or 0.0.0.0 listens everywhere).
func loopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
