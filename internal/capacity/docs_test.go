package capacity_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idempotent-consumer/sbcosmos/internal/capacity"
)

// TestDocsShowTheDeployedDefaults: docs/capacity.md shows the plan of each
// profile's defaults as orderctl plan prints it today (without the figures
// table, which the page has with links): a change of the model or of the
// defaults fails here until the page is updated.
func TestDocsShowTheDeployedDefaults(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "capacity.md"))
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	section := func(profile, from string) string {
		var out strings.Builder
		if err := capacity.Compute(capacity.DefaultInputs(profile)).WriteText(&out); err != nil {
			t.Fatal(err)
		}
		s := out.String()
		s = s[strings.Index(s, from):strings.Index(s, "\nFigures (")]
		return s
	}
	for _, f := range capacity.Figures() {
		if !strings.Contains(doc, "("+f.Source+")") {
			t.Errorf("docs/capacity.md does not link %s, the source of %q", f.Source, f.Name)
		}
	}
	for _, tt := range []struct{ profile, from string }{
		{capacity.ProfileDev, "Plan for"},
		{capacity.ProfileProduction, "Ceilings:"},
	} {
		want := "```text\n" + section(tt.profile, tt.from) + "```"
		if !strings.Contains(doc, want) {
			t.Errorf("docs/capacity.md does not show orderctl plan -profile %s as it prints now; paste:\n%s", tt.profile, want)
		}
	}
	// "Is it exactly once?" shows the production profile's ceilings too.
	b, err = os.ReadFile(filepath.Join("..", "..", "docs", "exactly-once.md"))
	if err != nil {
		t.Fatal(err)
	}
	if want := "```text\n" + section(capacity.ProfileProduction, "Ceilings:") + "```"; !strings.Contains(string(b), want) {
		t.Errorf("docs/exactly-once.md does not show orderctl plan -profile production's ceilings as it prints now; paste:\n%s", want)
	}
}
