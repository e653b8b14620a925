package cluster

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// newHCLogger returns an hclog.Logger, as raft wants, whose output goes to
// logger. Entries below level are dropped before they are formatted.
func newHCLogger(logger *slog.Logger, name string, level slog.Level) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:   name,
		Level:  hclogLevel(level),
		Output: io.Discard,
	})
	il.RegisterSink(&slogSink{logger: logger})
	return il
}

type slogSink struct {
	logger *slog.Logger
}

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	if !s.logger.Enabled(context.Background(), lvl) {
		return
	}
	s.logger.Log(context.Background(), lvl, msg, append([]any{"component", name}, args...)...)
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l <= slog.LevelDebug:
		return hclog.Debug
	case l <= slog.LevelInfo:
		return hclog.Info
	case l <= slog.LevelWarn:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel, hclog.DefaultLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}
