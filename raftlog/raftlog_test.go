package raftlog

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// layouts opens a group store in each layout, in a fresh dir; reopen
// closes everything and opens the same group again.
type layout struct {
	name string
	open func(t *testing.T, dir, group string) (s *Store, closeAll func())
}

var layouts = []layout{
	{"shared", func(t *testing.T, dir, group string) (*Store, func()) {
		db, err := OpenShared(filepath.Join(dir, "log"), Options{})
		require.NoError(t, err)
		s, err := db.Group(group)
		require.NoError(t, err)
		return s, func() { require.NoError(t, db.Close()) }
	}},
	{"boltdb", func(t *testing.T, dir, group string) (*Store, func()) {
		var b Bolt
		s, err := b.Open(filepath.Join(dir, group+".db"))
		require.NoError(t, err)
		return s, func() { require.NoError(t, s.Close()) }
	}},
}

func entry(index, term uint64, data string) *raft.Log {
	return &raft.Log{Index: index, Term: term, Type: raft.LogCommand, Data: []byte(data),
		AppendedAt: time.Unix(1_700_000_000, int64(index)).UTC()}
}

func storeRange(t *testing.T, s *Store, from, to, term uint64) {
	t.Helper()
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, entry(i, term, fmt.Sprintf("cmd-%d", i)))
	}
	require.NoError(t, s.StoreLogs(logs))
}

func indexes(t *testing.T, s *Store) (first, last uint64) {
	t.Helper()
	first, err := s.FirstIndex()
	require.NoError(t, err)
	last, err = s.LastIndex()
	require.NoError(t, err)
	return first, last
}

func TestLogStore(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			s, closeAll := l.open(t, dir, "g1")

			first, last := indexes(t, s)
			assert.Equal(t, [2]uint64{0, 0}, [2]uint64{first, last}, "empty log")
			var got raft.Log
			assert.ErrorIs(t, s.GetLog(1, &got), raft.ErrLogNotFound)

			storeRange(t, s, 1, 100, 1)
			require.NoError(t, s.StoreLog(entry(101, 2, "single")))
			first, last = indexes(t, s)
			assert.Equal(t, [2]uint64{1, 101}, [2]uint64{first, last})

			require.NoError(t, s.GetLog(42, &got))
			want := entry(42, 1, "cmd-42")
			assert.Equal(t, want.Index, got.Index)
			assert.Equal(t, want.Term, got.Term)
			assert.Equal(t, want.Type, got.Type)
			assert.Equal(t, want.Data, got.Data)
			assert.True(t, want.AppendedAt.Equal(got.AppendedAt), "appended at %v, want %v", got.AppendedAt, want.AppendedAt)

			// Compaction removes a prefix, conflict resolution a suffix.
			require.NoError(t, s.DeleteRange(1, 60))
			require.NoError(t, s.DeleteRange(91, 101))
			first, last = indexes(t, s)
			assert.Equal(t, [2]uint64{61, 90}, [2]uint64{first, last})
			assert.ErrorIs(t, s.GetLog(60, &got), raft.ErrLogNotFound)
			assert.ErrorIs(t, s.GetLog(91, &got), raft.ErrLogNotFound)
			require.NoError(t, s.GetLog(61, &got))
			assert.Equal(t, "cmd-61", string(got.Data))

			// Reopened, the log is as it was.
			closeAll()
			s, closeAll = l.open(t, dir, "g1")
			defer closeAll()
			first, last = indexes(t, s)
			assert.Equal(t, [2]uint64{61, 90}, [2]uint64{first, last})
			require.NoError(t, s.GetLog(90, &got))
			assert.Equal(t, "cmd-90", string(got.Data))
		})
	}
}

func TestStableStore(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			s, closeAll := l.open(t, dir, "meta")

			_, err := s.Get([]byte("LastVoteCand"))
			require.Error(t, err)
			assert.Equal(t, "not found", err.Error(), "hashicorp/raft matches this text")
			_, err = s.GetUint64([]byte("CurrentTerm"))
			require.Error(t, err)
			assert.Equal(t, "not found", err.Error())

			require.NoError(t, s.Set([]byte("LastVoteCand"), []byte("n2")))
			require.NoError(t, s.SetUint64([]byte("CurrentTerm"), 7))
			closeAll()

			s, closeAll = l.open(t, dir, "meta")
			defer closeAll()
			v, err := s.Get([]byte("LastVoteCand"))
			require.NoError(t, err)
			assert.Equal(t, "n2", string(v))
			term, err := s.GetUint64([]byte("CurrentTerm"))
			require.NoError(t, err)
			assert.Equal(t, uint64(7), term)
		})
	}
}

// Groups whose names are prefixes of one another ("1", "10") never see each
// other's entries or state, and write concurrently.
func TestSharedGroupsAreIsolated(t *testing.T) {
	db, err := OpenShared(t.TempDir(), Options{})
	require.NoError(t, err)
	defer db.Close()
	names := []string{"1", "10", "100", "meta"}
	stores := map[string]*Store{}
	for _, name := range names {
		stores[name], err = db.Group(name)
		require.NoError(t, err)
	}
	_, err = db.Group("1")
	assert.Error(t, err, "a group may be open once")

	syncs := db.Syncs()
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for from := uint64(1); from <= 200; from += 10 {
				storeRange(t, stores[name], from, from+9, uint64(i+1))
			}
			assert.NoError(t, stores[name].SetUint64([]byte("CurrentTerm"), uint64(i+1)))
		}()
	}
	wg.Wait()
	assert.Greater(t, db.Syncs(), syncs, "synced commits are counted")

	require.NoError(t, stores["10"].DeleteRange(1, 150))
	for i, name := range names {
		first, last := indexes(t, stores[name])
		wantFirst := uint64(1)
		if name == "10" {
			wantFirst = 151
		}
		assert.Equal(t, [2]uint64{wantFirst, 200}, [2]uint64{first, last}, "group %s", name)
		var got raft.Log
		require.NoError(t, stores[name].GetLog(200, &got))
		assert.Equal(t, uint64(i+1), got.Term, "group %s holds its own entries", name)
		term, err := stores[name].GetUint64([]byte("CurrentTerm"))
		require.NoError(t, err)
		assert.Equal(t, uint64(i+1), term)
	}

	// A closed group can be opened again.
	require.NoError(t, stores["1"].Close())
	again, err := db.Group("1")
	require.NoError(t, err)
	_, last := indexes(t, again)
	assert.Equal(t, uint64(200), last)
}

func TestDecodeLogRejectsDamage(t *testing.T) {
	good := appendLog(nil, entry(5, 3, "payload"))
	var l raft.Log
	require.NoError(t, decodeLog(5, good, &l))
	for _, tc := range []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown format", append([]byte{9}, good[1:]...)},
		{"truncated", good[:len(good)-3]},
		{"trailing bytes", append(append([]byte(nil), good...), 0)},
	} {
		assert.ErrorIs(t, decodeLog(5, tc.b, &l), errCorrupt, tc.name)
	}
}

func FuzzDecodeLog(f *testing.F) {
	f.Add(appendLog(nil, entry(1, 1, "x")))
	f.Add(appendLog(nil, &raft.Log{Type: raft.LogConfiguration, Extensions: []byte("e")}))
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if decodeLog(1, b, &l) != nil {
			return
		}
		// Whatever decodes re-encodes to a value that decodes the same.
		var again raft.Log
		require.NoError(t, decodeLog(1, appendLog(nil, &l), &again))
		assert.Equal(t, l, again)
	})
}

// crashEnv makes the test binary a writer that stores entries and reports
// each acknowledged index on stdout until it is killed.
const crashEnv = "RAFTLOG_CRASH_WRITER_DIR"

func TestMain(m *testing.M) {
	if dir := os.Getenv(crashEnv); dir != "" {
		crashWriter(dir, os.Getenv("RAFTLOG_CRASH_LAYOUT"))
		return
	}
	os.Exit(m.Run())
}

func crashWriter(dir, layoutName string) {
	var s *Store
	var err error
	switch layoutName {
	case "shared":
		var db *DB
		if db, err = OpenShared(filepath.Join(dir, "log"), Options{}); err == nil {
			s, err = db.Group("g")
		}
	default:
		var b Bolt
		s, err = b.Open(filepath.Join(dir, "g.db"))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Bounded: the parent kills us long before this ends.
	for i := uint64(1); i <= 1_000_000; i++ {
		if err := s.StoreLogs([]*raft.Log{entry(i, 1, fmt.Sprintf("cmd-%d", i))}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Println(i)
	}
}

// A writer killed with SIGKILL mid-stream loses nothing it acknowledged.
func TestKilledWriterKeepsAcknowledgedEntries(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.name, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), crashEnv+"="+dir, "RAFTLOG_CRASH_LAYOUT="+l.name)
			out, err := cmd.StdoutPipe()
			require.NoError(t, err)
			cmd.Stderr = os.Stderr
			require.NoError(t, cmd.Start())
			acked := uint64(0)
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				n, err := strconv.ParseUint(sc.Text(), 10, 64)
				require.NoError(t, err)
				acked = n
				if acked == 300 {
					require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
					break
				}
			}
			_ = cmd.Wait()
			require.Equal(t, uint64(300), acked, "the writer acknowledged entries before it was killed")

			s, closeAll := l.open(t, dir, "g")
			defer closeAll()
			_, last := indexes(t, s)
			assert.GreaterOrEqual(t, last, acked)
			for i := uint64(1); i <= acked; i++ {
				var got raft.Log
				require.NoError(t, s.GetLog(i, &got), "index %d was acknowledged", i)
				assert.Equal(t, fmt.Sprintf("cmd-%d", i), string(got.Data))
			}
		})
	}
}
