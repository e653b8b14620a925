package history

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// File names inside a history directory.
const (
	OpsFile         = "ops.jsonl"
	EventsFile      = "events.jsonl"
	PoliciesFile    = "policies.jsonl"
	AssignmentsFile = "assignments.jsonl"
	MetaFile        = "meta.json"
)

// metaJSON is the body of meta.json.
type metaJSON struct {
	ClockOffsets map[string]int64  `json:"clock_offsets"`
	Meta         map[string]string `json:"meta"`
}

// Write stores h in dir (created if needed) as ops.jsonl, events.jsonl,
// policies.jsonl, assignments.jsonl and meta.json, one JSON object per line in slice order.
// Output is deterministic: the same History gives the same bytes (maps are
// written with sorted keys). Each file is written to a temporary name and
// renamed, so a reader never sees half a file.
func (h History) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := writeFile(dir, OpsFile, func(w io.Writer) error { return writeLines(w, h.Ops) }); err != nil {
		return err
	}
	if err := writeFile(dir, EventsFile, func(w io.Writer) error { return writeLines(w, h.Events) }); err != nil {
		return err
	}
	if err := writeFile(dir, PoliciesFile, func(w io.Writer) error { return writeLines(w, h.Policies) }); err != nil {
		return err
	}
	if err := writeFile(dir, AssignmentsFile, func(w io.Writer) error { return writeLines(w, h.Assignments) }); err != nil {
		return err
	}
	return writeFile(dir, MetaFile, func(w io.Writer) error {
		m := metaJSON{ClockOffsets: h.ClockOffsets, Meta: h.Meta}
		if m.ClockOffsets == nil {
			m.ClockOffsets = map[string]int64{}
		}
		if m.Meta == nil {
			m.Meta = map[string]string{}
		}
		b, err := json.MarshalIndent(m, "", "  ")
		if err != nil {
			return err
		}
		_, err = w.Write(append(b, '\n'))
		return err
	})
}

// Read loads a history written by Write. ops.jsonl must exist; a missing
// events, policies, assignments or meta file reads as empty (a run that crashed early).
func Read(dir string) (History, error) {
	var h History
	if err := readLines(filepath.Join(dir, OpsFile), false, &h.Ops); err != nil {
		return History{}, err
	}
	if err := readLines(filepath.Join(dir, EventsFile), true, &h.Events); err != nil {
		return History{}, err
	}
	if err := readLines(filepath.Join(dir, PoliciesFile), true, &h.Policies); err != nil {
		return History{}, err
	}
	if err := readLines(filepath.Join(dir, AssignmentsFile), true, &h.Assignments); err != nil {
		return History{}, err
	}
	b, err := os.ReadFile(filepath.Join(dir, MetaFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return History{}, fmt.Errorf("history: %w", err)
	default:
		var m metaJSON
		if err := json.Unmarshal(b, &m); err != nil {
			return History{}, fmt.Errorf("history: %s: %w", MetaFile, err)
		}
		h.ClockOffsets, h.Meta = m.ClockOffsets, m.Meta
	}
	return h, nil
}

func writeFile(dir, name string, fill func(io.Writer) error) error {
	f, err := os.CreateTemp(dir, "."+name+".tmp*")
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	tmp := f.Name()
	w := bufio.NewWriter(f)
	err = f.Chmod(0o644) // CreateTemp makes it 0600
	if err == nil {
		err = fill(w)
	}
	if err == nil {
		err = w.Flush()
	}
	if err == nil {
		err = f.Close()
	} else {
		f.Close()
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(dir, name))
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("history: writing %s: %w", name, err)
	}
	return nil
}

func writeLines[T any](w io.Writer, items []T) error {
	for _, it := range items {
		b, err := json.Marshal(it)
		if err != nil {
			return err
		}
		if _, err := w.Write(append(b, '\n')); err != nil {
			return err
		}
	}
	return nil
}

// readLines decodes one JSON value per line of path into *out.
func readLines[T any](path string, optional bool, out *[]T) error {
	b, err := os.ReadFile(path)
	if optional && errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	for n, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			return fmt.Errorf("history: %s line %d: %w", filepath.Base(path), n+1, err)
		}
		*out = append(*out, v)
	}
	return nil
}
