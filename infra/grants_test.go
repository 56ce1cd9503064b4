package infra_test

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// grant is one role held by one principal at one kind of scope.
type grant struct {
	principal string // worker, producer, scaler, relay, loyalty, shipping, orderctl, audit, developer
	role      string
	scope     string // resource type (lower case), followed by the symbol for a topic subscription, or "database"/"account" or "container <param>" (the cosmos.bicep parameter naming it) for Cosmos data roles
}

func (g grant) String() string { return g.principal + " has " + g.role + " on " + g.scope }

// wantGrants is the whole of the deployment's access: each identity has the
// roles it uses and no more, each at the narrowest scope that works.
var wantGrants = []grant{
	{"worker", "Azure Service Bus Data Receiver", "microsoft.servicebus/namespaces/queues"},
	// The worker schedules delayed retries of its own messages on its queue.
	{"worker", "Azure Service Bus Data Sender", "microsoft.servicebus/namespaces/queues"},
	// The worker reads and writes the orders container only: with the
	// database it could rewrite the relay's leases and delete the
	// subscribers' inbox markers, which is what lets an event take effect
	// twice. It reads the database's metadata, as the others scoped to a
	// container do.
	{"worker", "Cosmos DB Built-in Data Contributor", "container containerName"},
	{"worker", metadataReaderRoleName, "database"},
	{"worker", "AcrPull", "microsoft.containerregistry/registries"},
	{"producer", "Azure Service Bus Data Sender", "microsoft.servicebus/namespaces/queues"},
	{"producer", "AcrPull", "microsoft.containerregistry/registries"},
	{"scaler", "Azure Service Bus Data Owner", "microsoft.servicebus/namespaces/queues"},
	{"developer", "Azure Service Bus Data Sender", "microsoft.servicebus/namespaces/queues"},
	{"developer", "Azure Service Bus Data Receiver", "microsoft.servicebus/namespaces/queues"},
	{"developer", "Cosmos DB Built-in Data Contributor", "database"},
	// Publish/subscribe: the relay sends to the topic only; each subscriber
	// receives from its own subscription only; the scaler reads each
	// subscription's length.
	{"relay", "Azure Service Bus Data Sender", "microsoft.servicebus/namespaces/topics"},
	{"relay", "AcrPull", "microsoft.containerregistry/registries"},
	{"loyalty", "Azure Service Bus Data Receiver", loyaltySubscriptionScope},
	{"loyalty", "AcrPull", "microsoft.containerregistry/registries"},
	{"shipping", "Azure Service Bus Data Receiver", shippingSubscriptionScope},
	// Least privilege per container: the relay reads the orders container's
	// change feed only and writes its own leases container; each subscriber
	// writes its own container; none of them reads or writes another
	// container's items. Each reads the database's metadata, which a role
	// scoped to a container does not give (azure-cosmos-dotnet-v3 #3638).
	{"relay", feedReaderRoleName, "container containerName"},
	{"relay", "Cosmos DB Built-in Data Contributor", "container leasesContainerName"},
	{"relay", metadataReaderRoleName, "database"},
	{"loyalty", "Cosmos DB Built-in Data Contributor", "container loyaltyContainerName"},
	{"loyalty", metadataReaderRoleName, "database"},
	{"shipping", "Cosmos DB Built-in Data Contributor", "container shippingContainerName"},
	{"shipping", metadataReaderRoleName, "database"},
	{"shipping", "AcrPull", "microsoft.containerregistry/registries"},
	{"scaler", "Azure Service Bus Data Owner", loyaltySubscriptionScope},
	{"scaler", "Azure Service Bus Data Owner", shippingSubscriptionScope},
	{"developer", "Azure Service Bus Data Sender", "microsoft.servicebus/namespaces/topics"},
	{"developer", "Azure Service Bus Data Receiver", loyaltySubscriptionScope},
	{"developer", "Azure Service Bus Data Receiver", shippingSubscriptionScope},
	// The operator tool's job: receive (and peek) the dead-letter queues of
	// the queue and of each subscription, resubmit to the queue, read the
	// stored orders; nothing on the topic.
	{"orderctl", "Azure Service Bus Data Receiver", "microsoft.servicebus/namespaces/queues"},
	{"orderctl", "Azure Service Bus Data Sender", "microsoft.servicebus/namespaces/queues"},
	{"orderctl", "Azure Service Bus Data Receiver", loyaltySubscriptionScope},
	{"orderctl", "Azure Service Bus Data Receiver", shippingSubscriptionScope},
	{"orderctl", "Cosmos DB Built-in Data Reader", "database"},
	{"orderctl", "AcrPull", "microsoft.containerregistry/registries"},
	// The scheduled audit: read every container of the database (orders,
	// payment records, events, leases, inbox markers) and pull its image;
	// nothing on Service Bus, no write anywhere.
	{"audit", "Cosmos DB Built-in Data Reader", "database"},
	{"audit", "AcrPull", "microsoft.containerregistry/registries"},
}

// The two subscriptions, told apart by their symbols in servicebus.bicep: a
// subscriber must receive from its own subscription, not the other's.
const (
	loyaltySubscriptionScope  = "microsoft.servicebus/namespaces/topics/subscriptions loyaltySubscription"
	shippingSubscriptionScope = "microsoft.servicebus/namespaces/topics/subscriptions shippingSubscription"
)

// The Cosmos DB custom roles, by their roleName, and the exact data actions
// each must have (Azure Cosmos DB for NoSQL data plane actions reference).
const (
	feedReaderRoleName     = "Orders change feed reader"
	metadataReaderRoleName = "Database metadata reader"
)

var wantCustomRoles = map[string][]string{
	feedReaderRoleName: {
		"Microsoft.DocumentDB/databaseAccounts/readMetadata",
		"Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read",
		"Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/readChangeFeed",
	},
	metadataReaderRoleName: {
		"Microsoft.DocumentDB/databaseAccounts/readMetadata",
	},
}

// checkCustomRoles requires every Cosmos DB role definition to be one of
// wantCustomRoles with exactly its data actions, assignable in the account.
func checkCustomRoles(b *bicep) error {
	seen := map[string]bool{}
	for _, d := range b.all(infra.Resource, "Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions") {
		name, _ := infra.Lookup(d.Body, "properties.roleName")
		name, _ = infra.Unquote(name)
		want, ok := wantCustomRoles[name]
		if !ok {
			return fmt.Errorf("%v: custom role %q is none of the roles the deployment needs (%v)", d, name, wantCustomRoles)
		}
		seen[name] = true
		perms, _ := infra.Lookup(d.Body, "properties.permissions")
		items, err := infra.ParseArray(perms)
		if err != nil || len(items) != 1 {
			return fmt.Errorf("%v: want one permission (%v)", d, err)
		}
		acts, _ := infra.Lookup(items[0], "dataActions")
		if v, ok := b.find(d.file, infra.Var, acts); ok {
			acts = v.Value
		}
		elems, err := infra.ParseArray(acts)
		if err != nil {
			return fmt.Errorf("%v: dataActions: %v", d, err)
		}
		var got []string
		for _, e := range elems {
			if v, ok := b.find(d.file, infra.Var, e); ok {
				e = v.Value
			}
			u, ok := infra.Unquote(e)
			if !ok {
				return fmt.Errorf("%v: data action %s is not a literal", d, e)
			}
			got = append(got, u)
		}
		sort.Strings(got)
		w := append([]string(nil), want...)
		sort.Strings(w)
		if strings.Join(got, " ") != strings.Join(w, " ") {
			return fmt.Errorf("%v: role %q has data actions %v, want exactly %v", d, name, got, w)
		}
		if typ, _ := infra.Lookup(d.Body, "properties.type"); typ != "'CustomRole'" {
			return fmt.Errorf("%v: type %s, want 'CustomRole'", d, typ)
		}
	}
	for name := range wantCustomRoles {
		if !seen[name] {
			return fmt.Errorf("no custom role %q", name)
		}
	}
	return nil
}

// roleNames names the built-in roles by their fixed ids.
var roleNames = map[string]string{
	"4f6d3b9b-027b-4f4c-9142-0e5a2a2247e0": "Azure Service Bus Data Receiver",
	"69a216fc-b8fb-44d8-bc22-1f3c2cd27a39": "Azure Service Bus Data Sender",
	"090c5cfd-751d-490a-894a-3ce6f1109419": "Azure Service Bus Data Owner",
	"7f951dda-4ed3-4680-a7ca-43fe172d538d": "AcrPull",
	"00000000-0000-0000-0000-000000000001": "Cosmos DB Built-in Data Reader",
	"00000000-0000-0000-0000-000000000002": "Cosmos DB Built-in Data Contributor",
	"8e3af657-a8ff-443c-a75c-2fe8c4bcb635": "Owner",
	"b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
}

// identityModules maps the identity modules in main.bicep to the principal
// they stand for.
var identityModules = map[string]string{
	"workerIdentity":   "worker",
	"producerIdentity": "producer",
	"scalerIdentity":   "scaler",
	"relayIdentity":    "relay",
	"loyaltyIdentity":  "loyalty",
	"shippingIdentity": "shipping",
	"orderctlIdentity": "orderctl",
	"auditIdentity":    "audit",
}

var (
	guidRE  = regexp.MustCompile(`[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}`)
	identRE = regexp.MustCompile(`[A-Za-z_]\w*`)
	forRE   = regexp.MustCompile(`^\[for\s+(\w+)\s+in\s+(\w+)\s*:`)
)

// checkGrants collects every role assignment in the templates, resolves who
// gets which role where, and requires the result to be exactly wantGrants.
func checkGrants(b *bicep) error {
	var got []grant
	for _, typ := range []string{"Microsoft.Authorization/roleAssignments", "Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments"} {
		for _, ra := range b.all(infra.Resource, typ) {
			gs, err := grantsOf(b, ra)
			if err != nil {
				return err
			}
			got = append(got, gs...)
		}
	}
	key := func(gs []grant) []string {
		var out []string
		for _, g := range gs {
			out = append(out, g.String())
		}
		sort.Strings(out)
		return out
	}
	gotKeys, wantKeys := key(got), key(wantGrants)
	extra, missing := diff(gotKeys, wantKeys), diff(wantKeys, gotKeys)
	if len(extra) > 0 || len(missing) > 0 {
		return fmt.Errorf("role grants differ from least privilege:\n  not allowed: %v\n  missing: %v", extra, missing)
	}
	return nil
}

// grantsOf resolves one role assignment resource to the grants it makes.
func grantsOf(b *bicep, ra decl) ([]grant, error) {
	roleExpr, err := get(ra, "properties.roleDefinitionId")
	if err != nil {
		return nil, err
	}
	roleID := resolveGUID(b, ra.file, roleExpr)
	role, ok := roleNames[strings.ToLower(roleID)]
	if sym, isID := strings.CutSuffix(roleExpr, ".id"); !ok && isID {
		// A custom role defined in the same file: named by its roleName.
		if d, found := b.find(ra.file, infra.Resource, sym); found && strings.HasSuffix(d.Type, "/sqlRoleDefinitions") {
			role, _ = infra.Lookup(d.Body, "properties.roleName")
			role, ok = infra.Unquote(role)
		}
	}
	if !ok {
		role = "unknown role " + roleExpr
	}
	principalExpr, err := get(ra, "properties.principalId")
	if err != nil {
		return nil, err
	}
	var scope string
	if strings.HasSuffix(strings.ToLower(ra.Type), "/sqlroleassignments") {
		scope, err = cosmosScope(b, ra)
	} else {
		scope, err = armScope(b, ra)
	}
	if err != nil {
		return nil, err
	}
	var principals []string
	if m := forRE.FindStringSubmatch(ra.Value); m != nil && principalExpr == m[1] {
		principals = resolvePrincipals(b, ra.file, m[2], true)
	} else {
		principals = resolvePrincipals(b, ra.file, principalExpr, false)
	}
	var gs []grant
	for _, p := range principals {
		gs = append(gs, grant{p, role, scope})
	}
	return gs, nil
}

// resolveGUID finds the role id in an expression, following vars.
func resolveGUID(b *bicep, file, expr string) string {
	if g := guidRE.FindString(expr); g != "" {
		return g
	}
	for _, id := range identRE.FindAllString(expr, -1) {
		if v, ok := b.find(file, infra.Var, id); ok {
			if g := guidRE.FindString(v.Value); g != "" {
				return g
			}
		}
	}
	return ""
}

// armScope is the resource type an Azure role assignment is scoped to (for a
// topic subscription followed by its symbol, since there are several), or
// the deployment scope of its file when it sets none.
func armScope(b *bicep, ra decl) (string, error) {
	s, ok := infra.Lookup(ra.Body, "scope")
	if !ok {
		if ra.file == mainFile {
			return "subscription", nil
		}
		return "resource group", nil
	}
	target, ok := b.find(ra.file, infra.Resource, s)
	if !ok {
		return "", fmt.Errorf("%v: scope %s is not a resource in %s", ra, s, ra.file)
	}
	typ := strings.ToLower(target.Type)
	if typ == "microsoft.servicebus/namespaces/topics/subscriptions" {
		return typ + " " + target.Name, nil
	}
	return typ, nil
}

// cosmosScope classifies a sqlRoleAssignments scope expression.
func cosmosScope(b *bicep, ra decl) (string, error) {
	s, err := get(ra, "properties.scope")
	if err != nil {
		return "", err
	}
	if v, ok := b.find(ra.file, infra.Var, s); ok {
		s = v.Value
	}
	switch {
	case strings.Contains(s, "/colls/"):
		// '${dataScope}/colls/${containerName}': named by the parameter.
		_, after, _ := strings.Cut(s, "/colls/")
		return "container " + strings.Trim(after, "${}'"), nil
	case strings.Contains(s, "/dbs/"):
		return "database", nil
	default:
		return "account", nil
	}
}

// resolvePrincipals follows a principal id expression back to the principals
// it can name: an identity module's output in main.bicep, main.bicep's
// principalId parameter (the developer), or a module parameter that
// main.bicep wires to one of those. array reports that expr names an array
// parameter whose elements are principal ids.
func resolvePrincipals(b *bicep, file, expr string, array bool) []string {
	if file == mainFile {
		if sym, ok := strings.CutSuffix(expr, ".outputs.principalId"); ok {
			if p, ok := identityModules[sym]; ok {
				return []string{p}
			}
		}
		if expr == "principalId" {
			return []string{"developer"}
		}
		return []string{"unresolved " + expr}
	}
	if _, ok := b.find(file, infra.Param, expr); !ok {
		return []string{"unresolved " + expr}
	}
	modPath := strings.TrimPrefix(file, bicepDir)
	passed, err := b.moduleParam(modPath, expr)
	if err != nil {
		return []string{"unresolved " + expr}
	}
	if !array {
		return resolvePrincipals(b, mainFile, passed, false)
	}
	elems, err := infra.ParseArray(passed)
	if err != nil {
		return []string{"unresolved " + passed}
	}
	var out []string
	for _, e := range elems {
		out = append(out, resolvePrincipals(b, mainFile, e, false)...)
	}
	return out
}

// diff returns the elements of a not in b.
func diff(a, b []string) []string {
	in := map[string]bool{}
	for _, s := range b {
		in[s] = true
	}
	var out []string
	for _, s := range a {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
