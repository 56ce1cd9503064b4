package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// VersionArg reports whether args ask for the version: -version or
// --version anywhere before a "--".
func VersionArg(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if a == "-version" || a == "--version" {
			return true
		}
	}
	return false
}

// Version returns the line a command's -version prints, from the build
// information the go command embeds in the binary (debug.ReadBuildInfo):
// the module's version ("(devel)" for a build from a checkout), the VCS
// revision and commit time with "+modified" when the work tree had changes,
// and the Go version and platform. Without build information (ok false) it
// says so.
func Version(name string, info *debug.BuildInfo, ok bool) string {
	if !ok || info == nil {
		return fmt.Sprintf("%s: no build information (%s %s/%s)", name, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s", name, info.Main.Path, info.Main.Version)
	if rev := settings["vcs.revision"]; rev != "" {
		fmt.Fprintf(&b, " %s revision %s", settings["vcs"], rev)
		if settings["vcs.modified"] == "true" {
			b.WriteString("+modified")
		}
		if t := settings["vcs.time"]; t != "" {
			fmt.Fprintf(&b, " (%s)", t)
		}
	}
	goos, goarch := settings["GOOS"], settings["GOARCH"]
	if goos == "" {
		goos, goarch = runtime.GOOS, runtime.GOARCH
	}
	fmt.Fprintf(&b, " %s %s/%s", info.GoVersion, goos, goarch)
	return b.String()
}

// PrintVersion writes Version(name, debug.ReadBuildInfo()) and a newline.
func PrintVersion(w io.Writer, name string) error {
	info, ok := debug.ReadBuildInfo()
	_, err := fmt.Fprintln(w, Version(name, info, ok))
	return err
}
