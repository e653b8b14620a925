package raftgroup

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// NewHCLogger returns an hclog.Logger, as raft wants, whose output goes to
// logger. Entries below level are dropped before they are formatted.
func NewHCLogger(logger *slog.Logger, name string, level slog.Level) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:   name,
		Level:  hclogLevel(level),
		Output: io.Discard,
	})
	il.RegisterSink(&slogSink{logger: logger, min: level})
	return il
}

type slogSink struct {
	logger *slog.Logger
	min    slog.Level
}

func (s *slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lvl := slogLevel(level)
	if lvl < s.min || !s.logger.Enabled(context.Background(), lvl) {
		return
	}
	for i, a := range args {
		if f, ok := a.(hclog.Format); ok && len(f) > 0 {
			if format, ok := f[0].(string); ok {
				args[i] = fmt.Sprintf(format, f[1:]...)
			}
		}
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
