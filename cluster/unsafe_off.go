//go:build !unsafe_decide

package cluster

// unsafeLocalDecisions is false in every real build. See unsafe_on.go.
const unsafeLocalDecisions = false
