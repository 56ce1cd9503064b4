package layout_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"

	"strconv"
	"strings"
	"testing"
)

// copyRows are the rows of README's What to copy table, by their first
// column, and the packages each counts (go list patterns: a /... takes the
// packages below too, so a new subpackage counts without an edit here).
//
// The figures, as README defines them: files and lines are the non-test
// .go files of the packages' directories (every build tag; lines as wc -l
// counts them); external modules are the modules other than this one that
// provide a package of go list -deps of the packages (their non-test
// imports, transitively).
var copyRows = []struct {
	row      string
	patterns []string
}{
	{"the pattern alone", []string{"./idempotent/..."}},
	{"the whole product core", []string{"./idempotent/...", "./worker/...", "./cosmosstore/...", "./relay/..."}},
	{"the example domain", []string{"./order/...", "./payments/..."}},
	{"a second domain on the core", []string{"./examples/invoice/..."}},
}

// copyFigures is one row's figures.
type copyFigures struct {
	files, lines int
	modules      map[string]string // module path -> version
}

func measureCopy(t *testing.T, patterns []string) copyFigures {
	t.Helper()
	f := copyFigures{modules: map[string]string{}}
	for _, p := range goListPackages(t, patterns...) {
		entries, err := os.ReadDir(p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			n := e.Name()
			if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
				continue
			}
			src, err := os.ReadFile(filepath.Join(p.Dir, n))
			if err != nil {
				t.Fatal(err)
			}
			f.files++
			f.lines += bytes.Count(src, []byte("\n"))
		}
	}
	out := goList(t, append([]string{"-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, patterns...)...)
	for _, line := range strings.Split(string(out), "\n") {
		path, version, ok := strings.Cut(line, " ")
		if ok && path != modulePath {
			f.modules[path] = version
		}
	}
	return f
}

// TestReadmeWhatToCopy: the figures of README's What to copy table are
// those of the tree, and the modules it says to pin are the core's, at
// the versions go.mod selects.
func TestReadmeWhatToCopy(t *testing.T) {
	table := readmeTable(t, "what")
	var core copyFigures
	for _, r := range copyRows {
		f := measureCopy(t, r.patterns)
		if r.row == "the whole product core" {
			core = f
		}
		t.Logf("%s (%s): %d files, %d lines, %d external modules %v", r.row, strings.Join(r.patterns, " "), f.files, f.lines, len(f.modules), sortedKeys(f.modules))
		cells, ok := table[r.row]
		if !ok {
			t.Errorf("README's What to copy has no row %q", r.row)
			continue
		}
		for _, c := range []struct {
			col  int
			name string
			want int
		}{{2, "files", f.files}, {3, "lines", f.lines}, {4, "external modules", len(f.modules)}} {
			if got := leadingNumber(cells, c.col); got != c.want {
				t.Errorf("README's What to copy, row %q: %s %q, the tree has %d", r.row, c.name, cellOr(cells, c.col), c.want)
			}
		}
	}
	// The versions to pin: every module the core links, at go.mod's
	// version, and nothing else.
	pins := map[string]string{}
	for _, m := range regexp.MustCompile(`go get (\S+)@(v\S+)`).FindAllStringSubmatch(readmeSection(t, "What to copy"), -1) {
		pins[m[1]] = m[2]
	}
	for _, path := range sortedKeys(core.modules) {
		if pins[path] != core.modules[path] {
			t.Errorf("README's What to copy pins %s at %q; the core links it at %s", path, pins[path], core.modules[path])
		}
	}
	for _, path := range sortedKeys(pins) {
		if _, ok := core.modules[path]; !ok {
			t.Errorf("README's What to copy pins %s, which the core does not link", path)
		}
	}
}

// readmeSection returns the text of README's section "## title", up to
// the next section.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "\n## "+title+"\n")
	if !ok {
		t.Fatalf("README.md has no section %q", title)
	}
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest
}

// readmeTable returns the rows of the table in README's What to copy
// whose first header cell is header: each row's cells by its first cell,
// without Markdown's backquotes, links and emphasis.
func readmeTable(t *testing.T, header string) map[string][]string {
	t.Helper()
	rows := map[string][]string{}
	inTable := false
	for _, line := range strings.Split(readmeSection(t, "What to copy"), "\n") {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for i := range cells {
			cells[i] = plainCell(cells[i])
		}
		switch {
		case !inTable && cells[0] == header:
			inTable = true
		case inTable && !strings.HasPrefix(cells[0], "---"):
			rows[cells[0]] = cells
		}
	}
	if len(rows) == 0 {
		t.Fatalf("README's What to copy has no table headed %q", header)
	}
	return rows
}

var mdLink = regexp.MustCompile(`\[([^]]*)\]\([^)]*\)`)

func plainCell(s string) string {
	s = mdLink.ReplaceAllString(s, "$1")
	return strings.TrimSpace(strings.NewReplacer("`", "", "**", "").Replace(s))
}

// leadingNumber returns the number that starts cell i ("4,770" is 4770,
// "none" 0), or -1.
func leadingNumber(cells []string, i int) int {
	c := cellOr(cells, i)
	if strings.HasPrefix(c, "none") {
		return 0
	}
	end := strings.IndexFunc(c, func(r rune) bool { return !(r >= '0' && r <= '9' || r == ',') })
	if end < 0 {
		end = len(c)
	}
	n, err := strconv.Atoi(strings.ReplaceAll(c[:end], ",", ""))
	if err != nil {
		return -1
	}
	return n
}

func cellOr(cells []string, i int) string {
	if i < len(cells) {
		return cells[i]
	}
	return ""
}
