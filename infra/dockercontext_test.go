package infra_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestDockerContextHoldsWhatTheImagesBuild lists, with the go command, every
// file of this module that the images compile (every command under ./cmd and
// their packages, go.mod, go.sum) and requires each to
// stay in the Docker build context: a package the commands start to import
// from a directory .dockerignore leaves out would break every image build,
// locally and in the registry.
func TestDockerContextHoldsWhatTheImagesBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "go", "list", "-deps", "-f",
		`{{if .Module}}{{if .Module.Main}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{range .EmbedFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}{{end}}`,
		"./cmd/...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"go.mod", "go.sum", "Dockerfile"}
	for _, f := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, f)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	if len(files) < 5 {
		t.Fatalf("go list named %d files; expected the commands' sources", len(files)-3)
	}
	for _, f := range files {
		if p := dockerignored(string(ignore), f); p != "" {
			t.Errorf(".dockerignore %q leaves %s out of the build context, but the images compile it", p, f)
		}
	}
}

func TestDockerignored(t *testing.T) {
	const ignore = "# comment\n.git\n**/node_modules\ninfra\n*.test\nbin\n!bin/keep\n"
	for name, want := range map[string]string{
		"cmd/orderworker/main.go":      "",
		"infra/bicep.go":               "infra",
		"infra":                        "infra",
		"internal/x/node_modules/a.js": "**/node_modules",
		"node_modules/a.js":            "**/node_modules",
		"worker.test":                  "*.test",
		"cmd/worker.test":              "",
		"bin/keep":                     "",
		"bin/other":                    "bin",
		"infrastructure/x.go":          "",
		".github/workflows/ci.yml":     "",
	} {
		if got := dockerignored(ignore, name); got != want {
			t.Errorf("dockerignored(%s) = %q, want %q", name, got, want)
		}
	}
}
