// Package logbuf is a log's output kept in memory for a test to read while
// the code under test writes it from its own goroutines.
package logbuf

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is a bytes.Buffer safe for concurrent writers and readers.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// LineWith returns the first line written that contains every one of subs.
func (b *Buffer) LineWith(subs ...string) (string, bool) {
next:
	for line := range strings.Lines(b.String()) {
		for _, s := range subs {
			if !strings.Contains(line, s) {
				continue next
			}
		}
		return line, true
	}
	return "", false
}
