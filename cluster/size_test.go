package cluster

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The package's top level only puts its subpackages together; a job that
// grows here belongs in a subpackage of its own (ARCHITECTURE.md).
func TestTheTopLevelStaysSmall(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	lines := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		require.NoError(t, err)
		lines += bytes.Count(b, []byte("\n"))
	}
	require.Positive(t, lines, "the package's own files were read")
	assert.LessOrEqual(t, lines, 1500, "package cluster's top level, without tests")
}
