package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/quorate/quorate/server/httpapi"
)

// tokenCommand runs `quorate token new`: it makes a random API token and
// its auth-file entry (name, role, SHA-256), so that nobody hashes tokens
// by hand. The token itself is printed once and stored nowhere.
//
// Without --auth-file it prints the token and the entry to add. With
// --auth-file FILE it adds the entry to FILE (creating it, mode 0600) and
// prints only the token, for scripts: TOKEN=$(quorate token new ...).
func tokenCommand(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] != "new" {
		return usageError{errors.New("usage: quorate token new --name NAME --role decide|read|admin [--auth-file FILE]")}
	}
	fset := flag.NewFlagSet("quorate token new", flag.ContinueOnError)
	fset.SetOutput(stderr)
	name := fset.String("name", "", "the token's name, for logs and error messages (required)")
	role := fset.String("role", "", "decide (allow, batch, read a client), read (every GET, /metrics) or admin (everything) (required)")
	file := fset.String("auth-file", "", "add the entry to this auth file (created if missing) and print only the token")
	if err := fset.Parse(args[1:]); err != nil {
		return usageError{err}
	}
	if fset.NArg() > 0 {
		return usageError{fmt.Errorf("quorate token new takes no arguments, got %q", fset.Args())}
	}
	token := httpapi.NewToken()
	entry := httpapi.TokenEntry{Name: *name, Role: httpapi.Role(*role), SHA256: httpapi.HashToken(token)}
	if err := entry.Validate(); err != nil {
		return usageError{err}
	}
	if *file == "" {
		line, _ := json.Marshal(entry)
		fmt.Fprintf(stdout, "token: %s\n", token)
		fmt.Fprintf(stdout, "auth-file entry: %s\n", line)
		fmt.Fprintln(stderr, `The token is shown only here. Add the entry to the "tokens" list of the nodes' --auth-file and send them SIGHUP.`)
		return nil
	}
	if err := addToAuthFile(*file, entry); err != nil {
		return err
	}
	fmt.Fprintln(stdout, token)
	fmt.Fprintf(stderr, "added token %q (role %s) to %s; running nodes load it on SIGHUP\n", entry.Name, entry.Role, *file)
	return nil
}

// addToAuthFile adds entry to the auth file at path, refusing a name that
// is already there. It writes a new file and renames it into place, so a
// node reloading at the same moment reads the old file or the new one.
func addToAuthFile(path string, entry httpapi.TokenEntry) error {
	var af httpapi.AuthFile
	mode := fs.FileMode(0o600)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return err
	case len(bytes.TrimSpace(data)) > 0:
		if af, err = httpapi.ParseAuthFile(data); err != nil {
			return fmt.Errorf("auth file %s: %w", path, err)
		}
		if st, err := os.Stat(path); err == nil {
			mode = st.Mode().Perm()
		}
	}
	for _, e := range af.Tokens {
		if e.Name == entry.Name {
			return fmt.Errorf("auth file %s already has a token named %q", path, entry.Name)
		}
	}
	af.Tokens = append(af.Tokens, entry)
	tmp, err := os.CreateTemp(filepath.Dir(path), ".auth-*.json")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	out, _ := json.MarshalIndent(af, "", "  ")
	if _, err := tmp.Write(append(out, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
