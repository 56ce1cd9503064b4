package main

import (
	"io"

	"github.com/idempotent-consumer/sbcosmos/internal/cli"
)

// versionArgs reports whether args ask for -version (or --version).
func versionArgs(args []string) bool { return cli.VersionArg(args) }

// printVersion prints the module version, VCS revision and Go version the
// binary was built with.
func printVersion(w io.Writer) error { return cli.PrintVersion(w, "orderworker") }
