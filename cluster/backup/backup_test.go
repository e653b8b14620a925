package backup

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// write makes a backup of groups data groups whose sections hold data[i].
func write(t *testing.T, h Header, data [][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, h)
	require.NoError(t, err)
	for i, name := range Names(h.Groups) {
		s, err := w.Section(name)
		require.NoError(t, err)
		// Written in uneven pieces: chunking must not depend on them.
		for d := data[i]; len(d) > 0; {
			k := min(len(d), 1+rand.IntN(3<<19))
			_, err := s.Write(d[:k])
			require.NoError(t, err)
			d = d[k:]
		}
		require.NoError(t, s.Close())
	}
	require.NoError(t, w.Close())
	return buf.Bytes()
}

func read(b []byte) (Header, []Section, error) {
	var got []Section
	h, err := Read(bytes.NewReader(b), func(_ Header, s Section) error {
		got = append(got, s)
		return nil
	})
	return h, got, err
}

func TestRoundTrip(t *testing.T) {
	big := make([]byte, 3*maxChunk+17) // spans chunks
	for i := range big {
		big[i] = byte(i * 7)
	}
	data := [][]byte{[]byte("group zero"), {}, big, []byte("the meta group")}
	h := Header{CreatedUnixNano: 42, Binary: "v-test", ClusterVersion: 2, Groups: 3, TakenBy: "n2"}
	b := write(t, h, data)

	gotH, got, err := read(b)
	require.NoError(t, err)
	h.Format = Format
	assert.Equal(t, h, gotH)
	require.Len(t, got, 4)
	for i, name := range []string{"0", "1", "2", "meta"} {
		assert.Equal(t, name, got[i].Group)
		assert.Equal(t, len(data[i]), len(got[i].Data), "section %s", name)
		assert.True(t, bytes.Equal(data[i], got[i].Data), "section %s", name)
	}
}

// Every truncation and every single flipped bit of a backup is refused.
func TestDamageIsRefused(t *testing.T) {
	data := [][]byte{[]byte("alpha"), []byte("beta beta"), []byte("meta!")}
	b := write(t, Header{Groups: 2, TakenBy: "n1"}, data)
	for n := range len(b) {
		_, _, err := read(b[:n])
		require.Error(t, err, "cut to %d of %d bytes", n, len(b))
	}
	for i := range b {
		for bit := range 8 {
			c := bytes.Clone(b)
			c[i] ^= 1 << bit
			_, _, err := read(c)
			require.Error(t, err, "bit %d of byte %d flipped", bit, i)
		}
	}
	_, _, err := read(append(bytes.Clone(b), 0))
	assert.ErrorIs(t, err, ErrDamaged, "a byte after the trailer")
}

func TestWriterKeepsTheOrder(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Header{Groups: 2})
	require.NoError(t, err)
	_, err = w.Section("1")
	assert.Error(t, err, "group 1 before group 0")
	s, err := w.Section("0")
	require.NoError(t, err)
	_, err = w.Section("1")
	assert.Error(t, err, "while 0 is open")
	require.NoError(t, s.Close())
	assert.Error(t, w.Close(), "with 1 and meta missing")

	_, err = NewWriter(&buf, Header{Groups: 0})
	assert.Error(t, err)
}

func TestNotABackup(t *testing.T) {
	_, _, err := read([]byte("QRSNAP\x03 a raw snapshot, not a backup"))
	assert.ErrorIs(t, err, ErrDamaged)
	assert.ErrorContains(t, err, "not a quorate backup")

	b := write(t, Header{Groups: 1}, [][]byte{{1}, {2}})
	b[len(magic)+1] = Format + 1
	_, _, err = read(b)
	assert.ErrorContains(t, err, "newer quorate")
}
