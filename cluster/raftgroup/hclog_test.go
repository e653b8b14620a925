package raftgroup

import (
	"bytes"
	"log/slog"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
)

func TestHCLoggerRoutesIntoSlog(t *testing.T) {
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	hl := NewHCLogger(logger, "raft", slog.LevelWarn)

	hl.Info("below the raft level")
	hl.Warn("heartbeat failed", "servers", hclog.Fmt("%d voters", 3), "peer", "n2")
	out := buf.String()
	assert.NotContains(t, out, "below the raft level", "raft's level filters before slog's")
	assert.Contains(t, out, `msg="heartbeat failed"`)
	assert.Contains(t, out, `servers="3 voters"`, "hclog.Fmt values are rendered, not printed raw")
	assert.Contains(t, out, "component=raft")
	assert.Contains(t, out, "peer=n2")
}
