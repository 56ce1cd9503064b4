package infra_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// This file holds the rules that keep the first `azd up` from failing: each
// stands for a way a deployment that looks right is refused by Azure or azd,
// or hands an identity more than it should have. TestRules and
// TestRulesCatch run them with the rules in rules_test.go.

// ownerRoleID is the built-in Owner role's id (Azure built-in roles,
// "Owner": 8e3af657-a8ff-443c-a75c-2fe8c4bcb635).
const ownerRoleID = "8e3af657-a8ff-443c-a75c-2fe8c4bcb635"

// allRules is every rule the tests run.
func allRules() []rule {
	return append(append(append(append(append(append(append(append([]rule(nil), rules...), deployRules...), opsRules...), operateRules...), productionRules...), relayRules...), auditRules...), monthlyRules...)
}

var deployRules = []rule{
	{
		name:  "every module call passes exactly parameters the module declares, all it requires, of the declared type",
		check: bicepRule(checkModuleCalls),
		mutations: []mutation{
			// A misspelled parameter (the compiler's BCP037).
			{mainFile, "    receiverPrincipalId: workerIdentity.outputs.principalId\n", "    receivePrincipalId: workerIdentity.outputs.principalId\n"},
			// A required parameter left out (BCP035).
			{mainFile, "    logAnalyticsWorkspaceName: monitoring.outputs.name\n", ""},
			// A literal of the wrong type (BCP036).
			{mainFile, "    name: 'log-${resourceToken}'\n", "    name: 'log-${resourceToken}'\n    retentionInDays: '30'\n"},
		},
	},
	{
		name:  "control-plane writes under the Cosmos DB account run one after another",
		check: bicepRule(checkCosmosChain),
		mutations: []mutation{
			// The worker's assignment starts with the containers again.
			{bicepDir + "modules/cosmos.bicep", "  dependsOn: [\n    workerReadsMetadata\n  ]\n", "  dependsOn: [\n    database\n  ]\n"},
			// The two assignments start together.
			{bicepDir + "modules/cosmos.bicep", "  dependsOn: [\n    workerReadsWritesOrders\n  ]\n", "  dependsOn: [\n    container\n  ]\n"},
		},
	},
	{
		name: "the developer's role grants take the principal type from azd",
		check: func(r repo) error {
			b, err := parse(r)
			if err != nil {
				return err
			}
			params, err := parametersFile(r[bicepDir+"main.parameters.json"])
			if err != nil {
				return err
			}
			// azd fills AZURE_PRINCIPAL_TYPE with the signed-in principal's
			// kind; a default of User fails a service principal's deployment
			// with UnmatchedPrincipalType.
			if v := params["principalType"]; v != "${AZURE_PRINCIPAL_TYPE}" {
				return fmt.Errorf("main.parameters.json: principalType = %v, want ${AZURE_PRINCIPAL_TYPE} with no default", v)
			}
			if d, err := b.paramDefault("principalType"); err != nil || d != "" {
				return fmt.Errorf("main.bicep: param principalType default %q (%v), want '' (unknown: leave principalType off)", d, err)
			}
			n := 0
			for _, ra := range b.all(infra.Resource, "Microsoft.Authorization/roleAssignments") {
				gs, err := grantsOf(b, ra)
				if err != nil {
					return err
				}
				if len(gs) == 0 || gs[0].principal != "developer" {
					continue
				}
				n++
				pt, err := get(ra, "properties.principalType")
				if err != nil {
					return err
				}
				m := regexp.MustCompile(`^empty\((\w+)\) \? null : (\w+)$`).FindStringSubmatch(pt)
				if m == nil || m[1] != m[2] {
					return fmt.Errorf("%v: principalType = %s, want `empty(p) ? null : p` so an unknown type is left to Azure", ra, pt)
				}
				passed, err := b.moduleParam(strings.TrimPrefix(ra.file, bicepDir), m[1])
				if err != nil {
					return err
				}
				if passed != "principalType" {
					return fmt.Errorf("%v: %s is wired to %s, want main.bicep's principalType", ra, m[1], passed)
				}
			}
			if n == 0 {
				return errors.New("no role assignment for the developer principal")
			}
			return nil
		},
		mutations: []mutation{
			{bicepDir + "main.parameters.json", `"${AZURE_PRINCIPAL_TYPE}"`, `"${AZURE_PRINCIPAL_TYPE=User}"`},
			{mainFile, "param principalType string = ''", "param principalType string = 'User'"},
			{bicepDir + "modules/servicebus.bicep", "guid(queue.id, developerPrincipalId, dataSenderRoleId)\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)\n    principalId: developerPrincipalId\n    principalType: empty(developerPrincipalType) ? null : developerPrincipalType\n", "guid(queue.id, developerPrincipalId, dataSenderRoleId)\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataSenderRoleId)\n    principalId: developerPrincipalId\n    principalType: 'User'\n"},
		},
	},
	{
		name: "the producer job's image does not depend on azd's resource-exists flags",
		check: func(r repo) error {
			b, err := parse(r)
			if err != nil {
				return err
			}
			for _, d := range b.all(infra.Resource, "Microsoft.App/jobs") {
				if d.Existing {
					return fmt.Errorf("%v: looks the producer job up with `existing`; on a first deployment with a stale flag that fails, so provisioning must not depend on it", d)
				}
			}
			if strings.Contains(r[bicepDir+"main.parameters.json"], "SERVICE_PRODUCER_RESOURCE_EXISTS") {
				return errors.New("main.parameters.json passes SERVICE_PRODUCER_RESOURCE_EXISTS")
			}
			job, err := serviceResource(b, "Microsoft.App/jobs", "producer")
			if err != nil {
				return err
			}
			cs, err := get(job, "properties.template.containers")
			if err != nil {
				return err
			}
			containers, err := infra.ParseArray(cs)
			if err != nil || len(containers) != 1 {
				return fmt.Errorf("%v: want one container (%v)", job, err)
			}
			img, _ := infra.Lookup(containers[0], "image")
			for i := 0; i < 10; i++ {
				v, ok := b.find(job.file, infra.Var, img)
				if !ok {
					break
				}
				img = v.Value
			}
			if _, ok := infra.Unquote(img); !ok {
				return fmt.Errorf("%v: image resolves to %s, want the literal bootstrap image (azd deploy sets the real one)", job, img)
			}
			return nil
		},
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "var producerImage = bootstrapProducerImage\n", "var producerImage = producerExists ? existingProducer.properties.template.containers[0].image : bootstrapProducerImage\n"},
			{bicepDir + "modules/containerapps.bicep", "var producerImage = bootstrapProducerImage\n", "resource existingProducer 'Microsoft.App/jobs@2025-01-01' existing = {\n  name: producerName\n}\n\nvar producerImage = bootstrapProducerImage\n"},
		},
	},
	{
		name: "the scaler identity is available to the KEDA rule only, not to the containers",
		check: bicepRule(func(b *bicep) error {
			for _, svc := range []string{"worker", "loyalty", "shipping"} {
				if err := checkScalerLifecycle(b, svc); err != nil {
					return err
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", workerIdentitySettings, strings.Replace(workerIdentitySettings, "lifecycle: 'None'", "lifecycle: 'All'", 1)},
			{bicepDir + "modules/containerapps.bicep", workerIdentitySettings, strings.Replace(workerIdentitySettings, "          lifecycle: 'None'\n", "", 1)},
			{bicepDir + "modules/containerapps.bicep", workerIdentitySettings, strings.Replace(workerIdentitySettings, "identity: scalerIdentityId", "identity: workerIdentityId", 1)},
			// A subscriber's scaler identity reaches its container.
			{bicepDir + "modules/containerapps.bicep", "          identity: shippingIdentityId\n        }\n      ]\n      identitySettings: [\n        {\n          identity: scalerIdentityId\n          lifecycle: 'None'\n", "          identity: shippingIdentityId\n        }\n      ]\n      identitySettings: [\n        {\n          identity: scalerIdentityId\n          lifecycle: 'All'\n"},
		},
	},
	{
		name: "the Log Analytics workspace refuses shared keys",
		check: bicepRule(func(b *bicep) error {
			ws, err := b.created("Microsoft.OperationalInsights/workspaces")
			if err != nil {
				return err
			}
			for _, w := range ws {
				if err := want(w, "properties.features.disableLocalAuth", "true"); err != nil {
					return err
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/monitoring.bicep", "      disableLocalAuth: true\n", "      disableLocalAuth: false\n"},
			{bicepDir + "modules/monitoring.bicep", "    features: {\n      disableLocalAuth: true\n    }\n", ""},
		},
	},
	{
		name: "the Dockerfile builds without BuildKit and the build context keeps it",
		check: func(r repo) error {
			df := r["Dockerfile"]
			for _, bk := range []struct{ re, what string }{
				{`(?m)^#\s*syntax\s*=`, "a # syntax directive"},
				{`(?m)^RUN\s+--`, "RUN with flags (--mount, --network, --security)"},
				{`(?m)^FROM\s+--platform=\S*BUILDPLATFORM`, "FROM --platform=$BUILDPLATFORM"},
				{`(?m)^(COPY|ADD)\s+(--\S+\s+)*--(link|chmod|parents|exclude|checksum|keep-git-dir)\b`, "COPY/ADD flags the classic builder lacks"},
				{`(?m)^(RUN|COPY)\s.*<<-?\s*['"]?\w+`, "a heredoc"},
			} {
				if loc := regexp.MustCompile(bk.re).FindStringIndex(df); loc != nil {
					return fmt.Errorf("Dockerfile:%d uses %s, which only BuildKit has; ACR Tasks (docker.remoteBuild) build without it", strings.Count(df[:loc[0]], "\n")+1, bk.what)
				}
			}
			if p := dockerignored(r[".dockerignore"], "Dockerfile"); p != "" {
				return fmt.Errorf(".dockerignore pattern %q excludes the Dockerfile from the build context; a registry build reads it from there", p)
			}
			return nil
		},
		mutations: []mutation{
			{"Dockerfile", "# Builds the project's commands", "# syntax=docker/dockerfile:1\n# Builds the project's commands"},
			{"Dockerfile", "RUN go mod download\n", "RUN --mount=type=cache,target=/go/pkg/mod go mod download\n"},
			{"Dockerfile", "FROM golang:${GO_VERSION}-trixie AS build", "FROM --platform=$BUILDPLATFORM golang:${GO_VERSION}-trixie AS build"},
			{"Dockerfile", "COPY --from=build /out/app /app", "COPY --link --from=build /out/app /app"},
			{".dockerignore", "*.out\n", "*.out\nDockerfile\n"},
			{".dockerignore", "*.out\n", "*.out\nDocker*\n"},
		},
	},
	{
		name: "every base image is pinned to an exact version (and digest when given)",
		check: func(r repo) error {
			df := r["Dockerfile"]
			args := map[string]string{}
			for _, m := range regexp.MustCompile(`(?m)^ARG\s+(\w+)=(\S+)`).FindAllStringSubmatch(df, -1) {
				args[m[1]] = m[2]
			}
			stages := map[string]bool{}
			froms := regexp.MustCompile(`(?m)^FROM\s+(?:--\S+\s+)*(\S+)(?:\s+AS\s+(\S+))?`).FindAllStringSubmatch(df, -1)
			if len(froms) == 0 {
				return errors.New("Dockerfile has no FROM")
			}
			pinned := regexp.MustCompile(`^[a-z0-9./-]+:v?[0-9]+\.[0-9]+\.[0-9]+[\w.-]*(@sha256:[0-9a-f]{64})?$`)
			for _, m := range froms {
				img := regexp.MustCompile(`\$\{(\w+)\}|\$(\w+)`).ReplaceAllStringFunc(m[1], func(s string) string {
					return args[strings.Trim(s, "${}")]
				})
				switch {
				case img == "scratch" || stages[img]:
				case strings.Contains(img, "@") && !regexp.MustCompile(`@sha256:[0-9a-f]{64}$`).MatchString(img):
					return fmt.Errorf("base image %s: a digest is sha256: and 64 hex digits", img)
				case !pinned.MatchString(img):
					return fmt.Errorf("base image %s is not pinned to an exact version tag (such as golang:1.26.8-trixie); a moving tag changes the build under you", img)
				}
				if m[2] != "" {
					stages[m[2]] = true
				}
			}
			return nil
		},
		mutations: []mutation{
			{"Dockerfile", "ARG GO_VERSION=1.26.8\n", "ARG GO_VERSION=1.26\n"},
			{"Dockerfile", "FROM golang:${GO_VERSION}-trixie AS build", "FROM golang:latest AS build"},
			{"Dockerfile", "FROM scratch", "FROM gcr.io/distroless/static-debian12:nonroot"},
			{"Dockerfile", "FROM golang:${GO_VERSION}-trixie AS build", "FROM golang:${GO_VERSION}-trixie@sha256:1234 AS build"},
		},
	},
}

// checkCosmosChain requires every two resources under one Cosmos DB account
// (databases, containers, SQL role assignments) to be ordered by the
// dependencies Bicep derives (parent, dependsOn, symbol references):
// Cosmos DB refuses concurrent control-plane writes to one account.
func checkCosmosChain(b *bicep) error {
	for _, file := range b.files {
		var under []decl
		for _, d := range b.all(infra.Resource, "") {
			if d.file == file && !d.Existing && strings.HasPrefix(strings.ToLower(d.Type), "microsoft.documentdb/databaseaccounts/") {
				under = append(under, d)
			}
		}
		deps := map[string][]string{}
		for _, d := range under {
			refs, err := resourceRefs(b, d)
			if err != nil {
				return err
			}
			deps[d.Name] = refs
		}
		var reaches func(from, to string, seen map[string]bool) bool
		reaches = func(from, to string, seen map[string]bool) bool {
			if from == to {
				return true
			}
			if seen[from] {
				return false
			}
			seen[from] = true
			for _, n := range deps[from] {
				if reaches(n, to, seen) {
					return true
				}
			}
			return false
		}
		for i, x := range under {
			for _, y := range under[i+1:] {
				if !reaches(x.Name, y.Name, map[string]bool{}) && !reaches(y.Name, x.Name, map[string]bool{}) {
					return fmt.Errorf("%v and %v can deploy at the same time; Cosmos DB answers the second with \"another operation is in progress\": chain them with dependsOn", x, y)
				}
			}
		}
	}
	return nil
}

// resourceRefs returns the resources of d's file that d depends on: those
// its body (parent, dependsOn, any expression) refers to, directly or
// through vars.
func resourceRefs(b *bicep, d decl) ([]string, error) {
	refs, err := infra.References(d.Body)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	for len(refs) > 0 {
		id := refs[0]
		refs = refs[1:]
		if seen[id] {
			continue
		}
		seen[id] = true
		if r, ok := b.find(d.file, infra.Resource, id); ok && r.Name != d.Name {
			out = append(out, id)
			continue
		}
		if v, ok := b.find(d.file, infra.Var, id); ok {
			more, err := infra.References(v.Value)
			if err != nil {
				return nil, err
			}
			refs = append(refs, more...)
		}
	}
	sort.Strings(out)
	return out, nil
}

// dockerignored returns the .dockerignore line that leaves the file name (a
// slash-separated path in the build context) out of the context, or "" when
// it stays in. As Docker does, a pattern that matches a directory leaves out
// everything under it, "**/" matches any number of directories, and a later
// !pattern re-includes.
func dockerignored(ignore, name string) string {
	parts := strings.Split(name, "/")
	matches := func(p string) bool {
		for i := 1; i <= len(parts); i++ {
			prefix := strings.Join(parts[:i], "/")
			if ok, _ := path.Match(p, prefix); ok {
				return true
			}
			if rest, ok := strings.CutPrefix(p, "**/"); ok {
				for j := 0; j < i; j++ {
					if ok, _ := path.Match(rest, strings.Join(parts[j:i], "/")); ok {
						return true
					}
				}
			}
		}
		return false
	}
	excludedBy := ""
	for _, line := range strings.Split(ignore, "\n") {
		p := strings.TrimSpace(line)
		if p == "" || strings.HasPrefix(p, "#") {
			continue
		}
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "/")
		if matches(p) {
			if neg {
				excludedBy = ""
			} else {
				excludedBy = line
			}
		}
	}
	return excludedBy
}

// parametersFile returns the values main.parameters.json supplies.
func parametersFile(text string) (map[string]any, error) {
	var f struct {
		Parameters map[string]struct {
			Value any `json:"value"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(text), &f); err != nil {
		return nil, fmt.Errorf("main.parameters.json: %w", err)
	}
	out := map[string]any{}
	for k, v := range f.Parameters {
		out[k] = v.Value
	}
	return out, nil
}

// checkModuleCalls checks each module declaration's params against the
// module's param declarations: no unknown name, every param without a
// default supplied, and literal values of the declared type.
func checkModuleCalls(b *bicep) error {
	for _, m := range b.all(infra.Module, "") {
		target := path.Join(path.Dir(m.file), m.Type)
		if _, ok := b.decls[target]; !ok {
			return fmt.Errorf("%v: module %s is not among the templates", m, target)
		}
		params := map[string]decl{}
		for _, p := range b.all(infra.Param, "") {
			if p.file == target {
				params[p.Name] = p
			}
		}
		passedExpr, ok := infra.Lookup(m.Body, "params")
		if !ok {
			passedExpr = "{\n}"
		}
		passed, err := infra.ParseObject(passedExpr)
		if err != nil {
			return fmt.Errorf("%v: params: %w", m, err)
		}
		seen := map[string]bool{}
		for _, a := range passed {
			p, ok := params[a.Key]
			if !ok {
				return fmt.Errorf("%v: passes %s, which %s does not declare", m, a.Key, target)
			}
			seen[a.Key] = true
			if got := literalType(a.Value); got != "" && got != p.Type {
				return fmt.Errorf("%v: %s = %s is a %s literal; %s declares it %s", m, a.Key, a.Value, got, target, p.Type)
			}
		}
		var missing []string
		for name, p := range params {
			if p.Value == "" && !seen[name] {
				missing = append(missing, name)
			}
		}
		sort.Strings(missing)
		if len(missing) > 0 {
			return fmt.Errorf("%v: does not pass %v, which %s requires (no default)", m, missing, target)
		}
	}
	return nil
}

// literalType is the Bicep type of a literal expression, or "" when expr is
// not a literal.
func literalType(expr string) string {
	switch {
	case expr == "true" || expr == "false":
		return "bool"
	case regexp.MustCompile(`^-?[0-9]+$`).MatchString(expr):
		return "int"
	case regexp.MustCompile(`^'[^']*'$`).MatchString(expr):
		// A plain or interpolated string without quotes inside; anything
		// else (a ternary of strings, escaped quotes) is not checked.
		return "string"
	case strings.HasPrefix(expr, "{"):
		return "object"
	case strings.HasPrefix(expr, "[") && !strings.HasPrefix(expr, "[for"):
		return "array"
	}
	return ""
}

// checkScalerLifecycle requires the identity of svc's first KEDA rule to be
// listed once in the app's identitySettings with lifecycle None.
func checkScalerLifecycle(b *bicep, svc string) error {
	w, err := serviceResource(b, "Microsoft.App/containerApps", svc)
	if err != nil {
		return err
	}
	rulesExpr, err := get(w, "properties.template.scale.rules")
	if err != nil {
		return err
	}
	rs, err := infra.ParseArray(rulesExpr)
	if err != nil || len(rs) == 0 {
		return fmt.Errorf("%v: no scale rules (%v)", w, err)
	}
	scaler, _ := infra.Lookup(rs[0], "custom.identity")
	if scaler == "" {
		return fmt.Errorf("%v: scale rule has no identity", w)
	}
	settings, err := get(w, "properties.configuration.identitySettings")
	if err != nil {
		return fmt.Errorf("%w: without identitySettings every attached identity, the scaler's too, is available to the containers (lifecycle All)", err)
	}
	items, err := infra.ParseArray(settings)
	if err != nil {
		return err
	}
	found := 0
	for _, it := range items {
		if id, _ := infra.Lookup(it, "identity"); id != scaler {
			continue
		}
		found++
		if lc, _ := infra.Lookup(it, "lifecycle"); lc != "'None'" {
			return fmt.Errorf("%v: scaler identity lifecycle %s, want 'None'", w, lc)
		}
	}
	if found != 1 {
		return fmt.Errorf("%v: identitySettings name the scaler identity %s %d times, want once with lifecycle 'None'", w, scaler, found)
	}
	return nil
}
