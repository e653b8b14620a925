package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"time"
)

// respConn is a minimal Redis client: one connection, one command at a
// time, RESP2 requests and replies (enough for SCRIPT LOAD and EVALSHA).
type respConn struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// respError is an error reply from the server ("-ERR ...").
type respError string

func (e respError) Error() string { return "redis: " + string(e) }

// dialRESP connects to target, a redis://host:port URL.
func dialRESP(target string) (*respConn, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "redis" || u.Port() == "" {
		return nil, fmt.Errorf("redis target %q: want redis://host:port", target)
	}
	c, err := net.DialTimeout("tcp", u.Host, callTimeout)
	if err != nil {
		return nil, err
	}
	return &respConn{c: c, r: bufio.NewReader(c), w: bufio.NewWriter(c)}, nil
}

// do sends one command and reads its reply: int64, string (simple or bulk),
// nil (null bulk or array), []any, or a respError as the error. It gives up
// at ctx's deadline or after callTimeout, whichever is first.
func (rc *respConn) do(ctx context.Context, args ...[]byte) (any, error) {
	deadline := time.Now().Add(callTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if err := rc.c.SetDeadline(deadline); err != nil {
		return nil, err
	}
	rc.w.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
	for _, a := range args {
		rc.w.WriteString("$" + strconv.Itoa(len(a)) + "\r\n")
		rc.w.Write(a)
		rc.w.WriteString("\r\n")
	}
	if err := rc.w.Flush(); err != nil {
		return nil, err
	}
	return rc.read()
}

func (rc *respConn) read() (any, error) {
	line, err := rc.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errors.New("redis: malformed reply line")
	}
	kind, body := line[0], string(line[1:len(line)-2])
	switch kind {
	case '+':
		return body, nil
	case '-':
		return nil, respError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("redis: bad bulk length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(body)
		if err != nil || n < -1 {
			return nil, fmt.Errorf("redis: bad array length %q", body)
		}
		if n == -1 {
			return nil, nil
		}
		out := make([]any, n)
		for i := range out {
			// An error inside an array is a value, not the reply's error.
			v, err := rc.read()
			var re respError
			if errors.As(err, &re) {
				v, err = re, nil
			}
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	return nil, fmt.Errorf("redis: unknown reply type %q", kind)
}

func (rc *respConn) close() { rc.c.Close() }
