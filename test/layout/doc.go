// Package layout holds the repository's layout and dependency rules as tests
// that fail: what the product may import, what the core may import, what the
// production binaries may link, and the top level of the design card. It has
// no code of its own; see deps_test.go for the rules and why each exists.
//
// Run it with:
//
//	go test ./test/layout/
package layout
