package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/quorate/quorate/client"
)

// client returns the API client the flags describe: --addr (a bare
// host:port gets https:// with --ca-cert, http:// without), --token sent as
// a bearer token, --ca-cert as the only CA trusted for HTTPS (the system's
// CAs without it).
func (cl *cli) client() (*client.Node, error) {
	base := cl.addr
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cl.caCert != "" {
		if strings.HasPrefix(base, "http://") {
			return nil, usageError{fmt.Errorf("--ca-cert is for HTTPS, but --addr is %s", base)}
		}
		if !strings.Contains(base, "://") {
			base = "https://" + base
		}
		pem, err := os.ReadFile(cl.caCert)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-cert %s: no PEM certificate in it", cl.caCert)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	if cl.token != "" && strings.ContainsAny(cl.token, " \t\r\n") {
		return nil, usageError{errors.New("--token: a token has no white space (is QUORATE_TOKEN a file's content with a newline?)")}
	}
	hc := &http.Client{Transport: tr, Timeout: cl.timeout + time.Second}
	return client.NewNode(base, hc, client.WithToken(cl.token)), nil
}
