package cli

import "fmt"

// LocalStackUsage is the paragraph of the commands' -h that says how to get
// the local stack's tools, which live under test/ and so are not among what
// go install ./cmd/... builds.
const LocalStackUsage = `Local stack:  scripts/local.sh up builds and starts the test broker (sbbroker), cosmium with
              its change-feed proxy (feedproxy) and the payments service; eval "$(scripts/local.sh env)"
              sets the variables. These tools live under test/, so go install ./cmd/... does
              not give them; from a clone:
                go install ./test/sbbroker/cmd/sbbroker ./test/paymentservice/cmd/paymentservice ./test/e2etest/cmd/feedproxy
                go -C test/cosmiumtest/tools install ./cmd/cosmium
`

// VersionUsage is the line of command name's -h that documents -version.
func VersionUsage(name string) string {
	return fmt.Sprintf("Version:      %s -version prints the module version, VCS revision and Go version\n", name)
}
