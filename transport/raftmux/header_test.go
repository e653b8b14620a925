package raftmux

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadHeader(t *testing.T) {
	long := strings.Repeat("g", 255)
	tests := []struct {
		in       string
		wantName string
		wantErr  error
		wantRest string // what readHeader must leave unread
	}{
		{in: "QRM1\x017", wantName: "7"},
		{in: "QRM1\x017rest", wantName: "7", wantRest: "rest"},
		{in: "QRM1\xff" + long + "x", wantName: long, wantRest: "x"},
		{in: "QRM1\x00", wantErr: errEmptyName},
		{in: "QRM2\x017", wantErr: errBadMagic},
		{in: "GET / HTTP/1.1\r\n", wantErr: errBadMagic},
		{in: "", wantErr: io.EOF},
		{in: "QRM", wantErr: io.ErrUnexpectedEOF},
		{in: "QRM1\x03ab", wantErr: io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		r := strings.NewReader(tt.in)
		name, err := readHeader(r)
		if tt.wantErr != nil {
			assert.ErrorIs(t, err, tt.wantErr, "readHeader(%q)", tt.in)
			continue
		}
		if assert.NoError(t, err, "readHeader(%q)", tt.in) {
			assert.Equal(t, tt.wantName, name, "readHeader(%q)", tt.in)
			rest, _ := io.ReadAll(r)
			assert.Equal(t, tt.wantRest, string(rest), "readHeader(%q) left", tt.in)
		}
	}
}

func FuzzReadHeader(f *testing.F) {
	f.Add([]byte("QRM1\x017"))
	f.Add([]byte("QRM1\x00"))
	f.Add([]byte("QRM1\x05abc"))
	f.Fuzz(func(t *testing.T, in []byte) {
		name, err := readHeader(bytes.NewReader(in))
		if err != nil {
			return
		}
		// Whatever was accepted is a valid name whose header is a prefix of in.
		require.NoError(t, validName(name))
		require.True(t, bytes.HasPrefix(in, encodeHeader(name)))
	})
}

func TestDeliverQueueFull(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	m := New(ln, Options{})
	t.Cleanup(func() { require.NoError(t, m.Close()) })
	l, err := m.Layer("g")
	require.NoError(t, err)

	// Nobody accepts: the queue fills, then deliver refuses without blocking.
	peers := make([]net.Conn, acceptBacklog+1)
	for i := range peers {
		var c net.Conn
		c, peers[i] = net.Pipe()
		t.Cleanup(func() { _ = peers[i].Close() })
		l.deliver(c)
	}
	_, err = peers[acceptBacklog].Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the stream over the backlog is closed")

	// The queued ones are delivered in order; Close closes the rest.
	got, err := l.Accept()
	require.NoError(t, err)
	require.NoError(t, got.Close())
	_, err = peers[0].Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)

	require.NoError(t, l.Close())
	for _, p := range peers[1:acceptBacklog] {
		_, err = p.Read(make([]byte, 1))
		require.ErrorIs(t, err, io.EOF)
	}
}
