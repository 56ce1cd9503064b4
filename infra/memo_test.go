package infra_test

import (
	"regexp"
	"sync"
)

// forbidden is what the rule "no keys, connection strings or secrets
// anywhere" looks for: key material, and the emulator-only settings that
// must never reach Azure (they would turn key auth or TLS skipping on).
var forbidden = regexp.MustCompile(`(?i)listKeys|listConnectionStrings|connectionString|connection_string|primaryKey|secondaryKey|primaryMasterKey|primarySharedKey|sharedKey|SharedAccessKey|secretRef|@secure\(|COSMOS_KEY|INSECURE_SKIP_VERIFY|COSMOS_CREATE_CONTAINER`)

// forbiddenAt memoizes forbidden.FindStringIndex by text: TestRulesCatch
// runs every rule on every mutated copy of the repository, whose files but
// one are the same texts each time, and this case-insensitive scan was a
// third of its CPU.
var forbiddenAt sync.Map // text → []int, nil when none

// findForbidden is forbidden.FindStringIndex(text), computed once per text.
// It is safe for concurrent use.
func findForbidden(text string) []int {
	if m, ok := forbiddenAt.Load(text); ok {
		return m.([]int)
	}
	m := forbidden.FindStringIndex(text)
	forbiddenAt.Store(text, m)
	return m
}
