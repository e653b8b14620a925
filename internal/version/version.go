// Package version names this binary's release. The Makefile stamps Binary
// with `git describe` at build time (-ldflags -X); a plain `go build` or
// `go run` reports the release the source was written for.
package version

// Binary is this binary's version. It is a variable only so that the
// linker can set it.
var Binary = "0.15.0-dev"
