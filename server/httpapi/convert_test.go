package httpapi

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/quorate/quorate/api"
	"github.com/quorate/quorate/fsm"
)

// The api package states the identifier limits the state machine enforces.
func TestAPILimitsAreTheStateMachines(t *testing.T) {
	assert.Equal(t, fsm.MaxClientLen, api.MaxClientLen)
	assert.Equal(t, fsm.MaxRequestIDLen, api.MaxRequestIDLen)
}
