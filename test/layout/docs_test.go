package layout_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// guides are the Markdown pages whose relative links must resolve: the
// README, the guides under docs/ and the benchmarks' notebook.
func guides(t *testing.T) []string {
	t.Helper()
	root := moduleRoot(t)
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append(pages, filepath.Join(root, "README.md"), filepath.Join(root, "test", "bench", "README.md"))
}

var (
	mdLinkTarget = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	mdHeading    = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	mdFence      = regexp.MustCompile("(?ms)^```.*?^```")
)

// anchors returns the anchors of a Markdown page's headings, as GitHub
// makes them: lower case, punctuation dropped, spaces as hyphens.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	for _, m := range mdHeading.FindAllStringSubmatch(mdFence.ReplaceAllString(page, ""), -1) {
		a := strings.Map(func(r rune) rune {
			switch {
			case r == ' ':
				return '-'
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r):
				return r
			}
			return -1
		}, strings.ToLower(strings.NewReplacer("`", "", "*", "").Replace(m[1])))
		out[a] = true
	}
	return out
}

// TestGuideLinksResolve: every relative link of the guides names a file
// of the repository, and every anchor a heading of its page, so that a
// page cut down or a heading renamed does not leave a link behind.
func TestGuideLinksResolve(t *testing.T) {
	for _, page := range guides(t) {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		text := mdFence.ReplaceAllString(string(src), "")
		for _, m := range mdLinkTarget.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			path := page
			if file != "" {
				path = filepath.Join(filepath.Dir(page), filepath.FromSlash(file))
			}
			rel, _ := filepath.Rel(moduleRoot(t), page)
			dst, err := os.ReadFile(path)
			if err != nil {
				if _, statErr := os.Stat(path); statErr != nil {
					t.Errorf("%s: link %s: no such file", rel, target)
				}
				continue // a directory
			}
			if anchor != "" && strings.HasSuffix(path, ".md") && !anchors(string(dst))[anchor] {
				t.Errorf("%s: link %s: no heading makes the anchor #%s", rel, target, anchor)
			}
		}
	}
}

// TestCostIsAGuide: docs/cost.md stays a guide (the benchmarks' history
// is test/bench/README.md): short, and with no dated run, commit or
// session in it.
func TestCostIsAGuide(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "cost.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(src), "\n"); n > 250 {
		t.Errorf("docs/cost.md has %d lines; a guide has at most 250 (the history goes to test/bench/README.md)", n)
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile("`[0-9a-f]{7,40}`"), // a commit
		regexp.MustCompile(`(?i)\b\d{1,2} (January|February|March|April|May|June|July|August|September|October|November|December)\b`),
		regexp.MustCompile(`(?i)\b(January|February|March|April|May|June|July|August|September|October|November|December) \d{1,2}\b`),
		regexp.MustCompile(`(?i)\bthis (session|stop)\b|issue's author`),
	} {
		for _, m := range bad.FindAllString(string(src), -1) {
			t.Errorf("docs/cost.md holds %q: a guide says what holds, not when or in which run", m)
		}
	}
}
