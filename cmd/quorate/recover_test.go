package main

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestRecoverCommandRefusesBadUse(t *testing.T) {
	dir := t.TempDir()
	for name, args := range map[string][]string{
		"no voters":       {"recover", "--data-dir", dir},
		"no data dir":     {"recover", "--voters", "n1=127.0.0.1:7071"},
		"voter not ID=A":  {"recover", "--data-dir", dir, "--voters", "n1"},
		"empty address":   {"recover", "--data-dir", dir, "--voters", "n1="},
		"stray arguments": {"recover", "--data-dir", dir, "--voters", "n1=127.0.0.1:7071", "extra"},
	} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, &out, &errOut)
		assert.Equal(t, 2, exitCode(err), "%s: %v", name, err)
	}
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"recover", "--data-dir", dir, "--voters", "n1=127.0.0.1:7071"}, &out, &errOut)
	assert.ErrorContains(t, err, "not a node's data dir")
	assert.Equal(t, 1, exitCode(err))
}
