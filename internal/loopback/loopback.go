// Package loopback is the one check the tools under scripts/ make before
// they send anything: every address they drive must be on this host.
package loopback

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// Host reports whether host, a host name or IP address without a port (as
// url.URL.Hostname returns it), is a loopback IP address or "localhost".
func Host(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// CheckURL returns an error unless raw is a URL of any scheme (http://,
// redis://, ...) whose host is a loopback IP address or "localhost".
func CheckURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if !Host(u.Hostname()) {
		return fmt.Errorf("%q is not a loopback address", raw)
	}
	return nil
}
