// Package filelock takes exclusive advisory locks on files, so that test
// processes running at once (go test runs packages in parallel) build a
// shared helper binary once. It is proof tooling: nothing outside test/
// imports it.
package filelock

import "errors"

// ErrUnsupported reports that this platform has no advisory file locks.
var ErrUnsupported = errors.New("filelock: no file locks on this platform")
