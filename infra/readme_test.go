package infra_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestReadmeStatesWhereLogsGo keeps infra/README.md in line with the
// programs and the Bicep: the programs log to stderr (cmd/*/main.go hands
// os.Stderr to the logger), and the azure-monitor destination writes the
// resource-specific table ContainerAppConsoleLogs, not the _CL table of the
// log-analytics destination.
func TestReadmeStatesWhereLogsGo(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(string(b)), " ")
	if m := regexp.MustCompile(`(?i)(logs?|JSON)[^.]{0,40}\bon stdout\b`).FindString(text); m != "" {
		t.Errorf("README says %q; the programs log to stderr", m)
	}
	if !regexp.MustCompile(`(?i)log[^.]{0,40}\bto \**stderr\b`).MatchString(text) {
		t.Error("README does not say the programs log to stderr")
	}
	if strings.Contains(text, "ContainerAppConsoleLogs_CL") {
		t.Error("README names ContainerAppConsoleLogs_CL, the log-analytics destination's table; this deployment writes ContainerAppConsoleLogs")
	}
	if !strings.Contains(text, "`ContainerAppConsoleLogs`") {
		t.Error("README does not name the table the logs land in, ContainerAppConsoleLogs")
	}
	// The README must not report as validated what it cannot be: the Owner
	// id it quotes is the real one.
	if strings.Contains(text, "8e3af657") && !strings.Contains(text, ownerRoleID) {
		t.Errorf("README quotes an Owner role id other than %s", ownerRoleID)
	}
}
