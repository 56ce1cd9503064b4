package layout_test

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCoreCompilesOnItsOwn lifts the core out as a user would: the non-test
// files of idempotent/, worker/ (with its option packages), cosmosstore/
// and relay/ copied into a new module of another path, with this module's
// go.mod requirements and go.sum, and nothing else. It must build, and its package graph must hold nothing of
// this module. The build runs offline (GOPROXY=off): the modules it needs
// are the ones this module's own build already fetched.
func TestCoreCompilesOnItsOwn(t *testing.T) {
	root := moduleRoot(t)
	dir := t.TempDir()
	const newPath = "example.com/mycopy"
	copied := map[string]bool{} // the packages copied, by directory
	for _, pkg := range core {
		err := filepath.WalkDir(filepath.Join(root, pkg), func(path string, e fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := e.Name()
			if e.IsDir() {
				if name == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			src = bytes.ReplaceAll(src, []byte(`"`+modulePath+`/`), []byte(`"`+newPath+`/`))
			if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(rel)), 0o755); err != nil {
				return err
			}
			copied[filepath.ToSlash(filepath.Dir(rel))] = true
			return os.WriteFile(filepath.Join(dir, rel), src, 0o644)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// The core's option packages (worker/breaker, worker/otelworker) are
	// part of what is copied: the copy must build them too.
	for _, want := range []string{"worker/breaker", "worker/otelworker"} {
		if !copied[want] {
			t.Errorf("the copy has no %s", want)
		}
	}
	gomod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	gomod = bytes.Replace(gomod, []byte("module "+modulePath), []byte("module "+newPath), 1)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), gomod, 0o644); err != nil {
		t.Fatal(err)
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), sum, 0o644); err != nil {
		t.Fatal(err)
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), goBin, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s in the copy: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("build", "./...")
	for _, p := range strings.Fields(run("list", "-deps", "./...")) {
		if strings.HasPrefix(p, modulePath) {
			t.Errorf("the copy depends on %s", p)
		}
	}
}
