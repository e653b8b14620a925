package membership

import (
	"errors"
	"log/slog"
	"time"
)

// ErrStopped is what JoinRetrying returns when it was stopped.
var ErrStopped = errors.New("membership: join stopped")

// JoinRetrying joins the members at addrs, trying up to attempts times (0:
// until stop is closed) half a second apart, so that nodes started together
// find each other. A member's refusal of this node (Incompatible) ends it
// at once with that error; a closed stop with ErrStopped; the last
// attempt's failure is returned as it is.
func (m *Gossip) JoinRetrying(addrs []string, attempts int, stop <-chan struct{}, logger *slog.Logger) error {
	var err error
	for attempt := 0; attempts == 0 || attempt < attempts; attempt++ {
		_ = m.Incompatible() // only this attempt's refusals count
		if err = m.Join(addrs); err == nil {
			return nil
		}
		if refused := m.Incompatible(); refused != nil {
			return refused
		}
		logger.Warn("join failed; retrying", "attempt", attempt+1, "err", err)
		select {
		case <-time.After(500 * time.Millisecond):
		case <-stop:
			return ErrStopped
		}
	}
	return err
}
