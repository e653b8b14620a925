package raftmux

import (
	"errors"
	"fmt"
	"io"
)

// magic opens every stream; the trailing digit is the header version.
const magic = "QRM1"

// maxNameLen is the longest layer name: its length is one byte on the wire.
const maxNameLen = 255

var (
	errBadMagic  = errors.New("bad magic")
	errEmptyName = errors.New("empty name")
)

// validName reports whether name fits in a header.
func validName(name string) error {
	if len(name) < 1 || len(name) > maxNameLen {
		return fmt.Errorf("%w: %d bytes, want 1..%d", ErrInvalidName, len(name), maxNameLen)
	}
	return nil
}

// encodeHeader returns the header that routes a stream to the layer name,
// which must already be valid.
func encodeHeader(name string) []byte {
	h := make([]byte, 0, len(magic)+1+len(name))
	h = append(h, magic...)
	h = append(h, byte(len(name)))
	return append(h, name...)
}

// readHeader reads one header from r and returns the name it carries. It
// reads exactly the header's bytes and nothing after them.
func readHeader(r io.Reader) (string, error) {
	var fixed [len(magic) + 1]byte
	if _, err := io.ReadFull(r, fixed[:]); err != nil {
		return "", err
	}
	if string(fixed[:len(magic)]) != magic {
		return "", fmt.Errorf("%w %q", errBadMagic, fixed[:len(magic)])
	}
	n := int(fixed[len(magic)])
	if n == 0 {
		return "", errEmptyName
	}
	name := make([]byte, n)
	if _, err := io.ReadFull(r, name); err != nil {
		return "", err
	}
	return string(name), nil
}
