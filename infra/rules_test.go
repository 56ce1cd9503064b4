package infra_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// This file enforces the deployment's rules on the text of the templates, the
// azd project file and the Dockerfile. Each rule is a function over a repo
// snapshot. TestRules runs every rule over the real files; TestRulesCatch
// runs each rule over copies of the files with one deliberate mutation each
// and requires the rule to fail, so no rule can pass vacuously.

// repo is a snapshot of the files the rules read, keyed by slash-separated
// path relative to the repository root.
type repo map[string]string

const (
	bicepDir = "infra/bicep/"
	mainFile = bicepDir + "main.bicep"
)

func loadRepo(t *testing.T) repo {
	t.Helper()
	r := repo{}
	files, err := infra.ReadDir("bicep")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		r[bicepDir+f.Path] = f.Text
	}
	for _, p := range []string{"infra/bicep/main.parameters.json", "azure.yaml", "Dockerfile", ".dockerignore", hookSh, hookPs1} {
		b, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		r[p] = string(b)
	}
	return r
}

// decl is a declaration together with the template it is in.
type decl struct {
	file string
	infra.Decl
}

func (d decl) String() string { return fmt.Sprintf("%s:%d %s %s", d.file, d.Line, d.Kind, d.Name) }

// bicep is the parsed form of a repo's templates.
type bicep struct {
	decls map[string][]infra.Decl // by file
	files []string                // sorted
}

// parsed memoizes parse by the templates' text: TestRulesCatch runs every
// rule over every mutated copy, and the rules only read the result.
var parsed sync.Map // string -> *bicep

func parse(r repo) (*bicep, error) {
	var key strings.Builder
	var paths []string
	for path := range r {
		if strings.HasSuffix(path, ".bicep") {
			paths = append(paths, path)
		}
	}
	sort.Strings(paths)
	// The key is every template's path, length and text; grown once, as
	// this runs once per rule and mutation.
	n := 0
	for _, p := range paths {
		n += len(p) + len(r[p]) + 24
	}
	key.Grow(n)
	for _, p := range paths {
		key.WriteString(p)
		key.WriteByte(0)
		key.WriteString(strconv.Itoa(len(r[p])))
		key.WriteByte(0)
		key.WriteString(r[p])
		key.WriteByte(0)
	}
	if b, ok := parsed.Load(key.String()); ok {
		return b.(*bicep), nil
	}
	b, err := parseUncached(r)
	if err == nil {
		parsed.Store(key.String(), b)
	}
	return b, err
}

func parseUncached(r repo) (*bicep, error) {
	b := &bicep{decls: map[string][]infra.Decl{}}
	for path, text := range r {
		if !strings.HasSuffix(path, ".bicep") {
			continue
		}
		ds, err := infra.Decls(infra.File{Path: path, Text: text})
		if err != nil {
			return nil, err
		}
		b.decls[path] = ds
		b.files = append(b.files, path)
	}
	sort.Strings(b.files)
	if _, ok := b.decls[mainFile]; !ok {
		return nil, fmt.Errorf("%s missing", mainFile)
	}
	return b, nil
}

// all returns every declaration of kind k (and, for resources, of type typ
// unless typ is empty), across all templates.
func (b *bicep) all(k infra.Kind, typ string) []decl {
	var out []decl
	for _, f := range b.files {
		for _, d := range b.decls[f] {
			if d.Kind == k && (typ == "" || strings.EqualFold(d.Type, typ)) {
				out = append(out, decl{f, d})
			}
		}
	}
	return out
}

// find returns the declaration of kind k named name in file.
func (b *bicep) find(file string, k infra.Kind, name string) (decl, bool) {
	for _, d := range b.decls[file] {
		if d.Kind == k && d.Name == name {
			return decl{file, d}, true
		}
	}
	return decl{}, false
}

// created returns the resources of type typ that the templates create (not
// `existing` references). It is an error for there to be none.
func (b *bicep) created(typ string) ([]decl, error) {
	var out []decl
	for _, d := range b.all(infra.Resource, typ) {
		if !d.Existing {
			out = append(out, d)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s resource", typ)
	}
	return out, nil
}

// get looks up a dot-separated path in d's body and fails when it is absent.
func get(d decl, path string) (string, error) {
	v, ok := infra.Lookup(d.Body, path)
	if !ok {
		return "", fmt.Errorf("%v: %s not set", d, path)
	}
	return v, nil
}

// want checks that path in d's body is exactly the expression expr.
func want(d decl, path, expr string) error {
	v, err := get(d, path)
	if err != nil {
		return err
	}
	if v != expr {
		return fmt.Errorf("%v: %s = %s, want %s", d, path, v, expr)
	}
	return nil
}

// paramDefault returns the literal default of a main.bicep parameter.
func (b *bicep) paramDefault(name string) (string, error) {
	d, ok := b.find(mainFile, infra.Param, name)
	if !ok {
		return "", fmt.Errorf("main.bicep has no param %s", name)
	}
	if d.Value == "" {
		return "", fmt.Errorf("%v has no default", d)
	}
	if s, ok := infra.Unquote(d.Value); ok {
		return s, nil
	}
	return d.Value, nil
}

// moduleParam returns the expression main.bicep passes to param of the module
// declared from path (e.g. modules/servicebus.bicep).
func (b *bicep) moduleParam(path, param string) (string, error) {
	for _, m := range b.all(infra.Module, path) {
		if m.file != mainFile {
			continue
		}
		v, ok := infra.Lookup(m.Body, "params."+param)
		if !ok {
			return "", fmt.Errorf("%v does not pass %s", m, param)
		}
		return v, nil
	}
	return "", fmt.Errorf("main.bicep does not use %s", path)
}

// rule is one deployment rule and the mutations that must break it.
type rule struct {
	name      string
	check     func(repo) error
	mutations []mutation
}

// mutation replaces old with new in one file.
type mutation struct {
	file, old, new string
}

// bicepRule adapts a check over parsed templates to a rule check.
func bicepRule(check func(*bicep) error) func(repo) error {
	return func(r repo) error {
		b, err := parse(r)
		if err != nil {
			return err
		}
		return check(b)
	}
}

var rules = []rule{
	{
		name: "service bus namespace is Standard with local auth disabled",
		check: bicepRule(func(b *bicep) error {
			nss, err := b.created("Microsoft.ServiceBus/namespaces")
			if err != nil {
				return err
			}
			for _, ns := range nss {
				for _, prof := range profiles {
					tier, err := profileGet(b, ns, "sku.name", prof)
					if err != nil {
						return err
					}
					if tier != "'Standard'" && tier != "'Premium'" {
						return fmt.Errorf("%v: %s profile: sku %s has no duplicate detection; want Standard or Premium", ns, prof, tier)
					}
				}
				if err := want(ns, "properties.disableLocalAuth", "true"); err != nil {
					return err
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/servicebus.bicep", "    disableLocalAuth: true\n", "    disableLocalAuth: false\n"},
			{bicepDir + "modules/servicebus.bicep", "    disableLocalAuth: true\n", ""},
			{bicepDir + "modules/servicebus.bicep", "    name: 'Standard'\n    tier: 'Standard'", "    name: 'Basic'\n    tier: 'Basic'"},
		},
	},
	{
		name: "queue requires duplicate detection and dead-letters expired messages",
		check: bicepRule(func(b *bicep) error {
			qs, err := b.created("Microsoft.ServiceBus/namespaces/queues")
			if err != nil {
				return err
			}
			for _, q := range qs {
				if err := want(q, "properties.requiresDuplicateDetection", "true"); err != nil {
					return err
				}
				if err := want(q, "properties.deadLetteringOnMessageExpiration", "true"); err != nil {
					return err
				}
				// The queue settings the worker is told about must be the
				// module parameters main.bicep sets, not literals that drift.
				for prop, param := range map[string]string{
					"duplicateDetectionHistoryTimeWindow": "duplicateDetectionWindow",
					"lockDuration":                        "lockDuration",
					"maxDeliveryCount":                    "maxDeliveryCount",
					"defaultMessageTimeToLive":            "messageTimeToLive",
				} {
					if err := want(q, "properties."+prop, param); err != nil {
						return err
					}
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/servicebus.bicep", queueDupDetection, strings.Replace(queueDupDetection, "true", "false", 1)},
			{bicepDir + "modules/servicebus.bicep", queueDupDetection, strings.TrimPrefix(queueDupDetection, "    requiresDuplicateDetection: true\n")},
			{bicepDir + "modules/servicebus.bicep", "deadLetteringOnMessageExpiration: true\n    requiresSession: false\n    enablePartitioning", "deadLetteringOnMessageExpiration: false\n    requiresSession: false\n    enablePartitioning"},
			{bicepDir + "modules/servicebus.bicep", queueDupDetection, strings.Replace(queueDupDetection, "lockDuration: lockDuration", "lockDuration: 'PT5M'", 1)},
		},
	},
	{
		name: "queue defaults are inside Azure's ranges",
		check: bicepRule(func(b *bicep) error {
			ranges := []struct {
				param    string
				min, max time.Duration
			}{
				{"duplicateDetectionWindow", 20 * time.Second, 7 * 24 * time.Hour},
				{"lockDuration", 5 * time.Second, 5 * time.Minute},
				{"messageTimeToLive", 5 * time.Second, 0},
			}
			for _, r := range ranges {
				s, err := b.paramDefault(r.param)
				if err != nil {
					return err
				}
				d, err := infra.ParseDuration(s)
				if err != nil {
					return err
				}
				if d < r.min || (r.max > 0 && d > r.max) {
					return fmt.Errorf("param %s default %s outside [%v, %v]", r.param, s, r.min, r.max)
				}
			}
			s, err := b.paramDefault("maxDeliveryCount")
			if err != nil {
				return err
			}
			if n, err := strconv.Atoi(s); err != nil || n < 1 {
				return fmt.Errorf("param maxDeliveryCount default %s, want an integer >= 1", s)
			}
			// The worker renews locks every LockDuration/2 and abandons on
			// transient errors; a message must outlive its redeliveries.
			lock, _ := b.paramDefault("lockDuration")
			ttl, _ := b.paramDefault("messageTimeToLive")
			ld, _ := infra.ParseDuration(lock)
			td, _ := infra.ParseDuration(ttl)
			if n, _ := strconv.Atoi(s); td < time.Duration(n)*ld {
				return fmt.Errorf("message TTL %s is shorter than maxDeliveryCount (%s) x lockDuration (%s): messages would expire before they are retried out", ttl, s, lock)
			}
			return nil
		}),
		mutations: []mutation{
			{mainFile, "param lockDuration string = 'PT1M'", "param lockDuration string = 'PT6M'"},
			{mainFile, "param duplicateDetectionWindow string = 'PT10M'", "param duplicateDetectionWindow string = 'PT10S'"},
			{mainFile, "param maxDeliveryCount int = 10", "param maxDeliveryCount int = 0"},
			{mainFile, "param messageTimeToLive string = 'P14D'", "param messageTimeToLive string = 'PT5M'"},
			{mainFile, "param lockDuration string = 'PT1M'", "param lockDuration string = '60s'"},
		},
	},
	{
		name: "cosmos account refuses keys and key-based metadata writes",
		check: bicepRule(func(b *bicep) error {
			accts, err := b.created("Microsoft.DocumentDB/databaseAccounts")
			if err != nil {
				return err
			}
			for _, a := range accts {
				if err := want(a, "properties.disableLocalAuth", "true"); err != nil {
					return err
				}
				if err := want(a, "properties.disableKeyBasedMetadataWriteAccess", "true"); err != nil {
					return err
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/cosmos.bicep", "    disableLocalAuth: true\n", "    disableLocalAuth: false\n"},
			{bicepDir + "modules/cosmos.bicep", "disableKeyBasedMetadataWriteAccess: true", "disableKeyBasedMetadataWriteAccess: false"},
			{bicepDir + "modules/cosmos.bicep", "    disableKeyBasedMetadataWriteAccess: true\n", ""},
		},
	},
	{
		name: "cosmos account is serverless",
		check: bicepRule(func(b *bicep) error {
			accts, err := b.created("Microsoft.DocumentDB/databaseAccounts")
			if err != nil {
				return err
			}
			for _, a := range accts {
				// The dev profile; production has provisioned autoscale
				// throughput (the production rule).
				caps, err := profileGet(b, a, "properties.capabilities", "dev")
				if err != nil {
					return err
				}
				elems, err := infra.ParseArray(caps)
				if err != nil {
					return err
				}
				found := false
				for _, e := range elems {
					if v, ok := infra.Lookup(e, "name"); ok && v == "'EnableServerless'" {
						found = true
					}
				}
				if !found {
					return fmt.Errorf("%v: capabilities lack EnableServerless", a)
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/cosmos.bicep", "'EnableServerless'", "'EnableNoSQLVectorSearch'"},
		},
	},
	{
		name: "every container is partitioned on /orderId (Hash, v2) with per-item TTL",
		check: bicepRule(func(b *bicep) error {
			cs, err := b.created("Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers")
			if err != nil {
				return err
			}
			for _, c := range cs {
				paths, err := get(c, "properties.resource.partitionKey.paths")
				if err != nil {
					return err
				}
				elems, err := infra.ParseArray(paths)
				if err != nil {
					return err
				}
				if len(elems) != 1 || elems[0] != "'/orderId'" {
					return fmt.Errorf("%v: partition key paths %v, want ['/orderId']", c, elems)
				}
				if err := want(c, "properties.resource.partitionKey.kind", "'Hash'"); err != nil {
					return err
				}
				if err := want(c, "properties.resource.partitionKey.version", "2"); err != nil {
					return err
				}
				if err := want(c, "properties.resource.defaultTtl", "-1"); err != nil {
					return err
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/cosmos.bicep", "\n          '/orderId'", "\n          '/id'"},
			{bicepDir + "modules/cosmos.bicep", "\n        kind: 'Hash'", "\n        kind: 'MultiHash'"},
			{bicepDir + "modules/cosmos.bicep", "\n        version: 2", "\n        version: 1"},
			{bicepDir + "modules/cosmos.bicep", "\n      defaultTtl: -1", "\n      defaultTtl: 86400"},
			{bicepDir + "modules/cosmos.bicep", "\n      defaultTtl: -1\n", "\n"},
			// A subscriber's container partitioned otherwise.
			{bicepDir + "modules/cosmos.bicep", "\n            '/orderId'", "\n            '/id'"},
		},
	},
	{
		name:  "each identity has exactly the roles it uses, at the narrowest scope",
		check: bicepRule(checkGrants),
		mutations: []mutation{
			// Worker receives with Data Owner instead of Data Receiver.
			{bicepDir + "modules/servicebus.bicep", "roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataReceiverRoleId)\n    principalId: receiverPrincipalId", "roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', dataOwnerRoleId)\n    principalId: receiverPrincipalId"},
			// Worker's Receiver scoped to the whole namespace.
			{bicepDir + "modules/servicebus.bicep", "  scope: queue\n  name: guid(queue.id, receiverPrincipalId, dataReceiverRoleId", "  scope: namespace\n  name: guid(queue.id, receiverPrincipalId, dataReceiverRoleId"},
			// The scaler's identity receives in the worker's place.
			{mainFile, "receiverPrincipalId: workerIdentity.outputs.principalId", "receiverPrincipalId: scalerIdentity.outputs.principalId"},
			// The producer also gets AcrPull... and the scaler too.
			{mainFile, "      auditIdentity.outputs.principalId\n    ]", "      auditIdentity.outputs.principalId\n      scalerIdentity.outputs.principalId\n    ]"},
			// Cosmos data role at account scope.
			{bicepDir + "modules/cosmos.bicep", "var dataScope = '${account.id}/dbs/${databaseName}'", "var dataScope = account.id"},
			// The worker's Data Contributor on the whole database: it could
			// delete the subscribers' inbox markers and rewrite the leases.
			{bicepDir + "modules/cosmos.bicep", "    principalId: workerPrincipalId\n    scope: ordersScope", "    principalId: workerPrincipalId\n    scope: dataScope"},
			// Cosmos Data Reader instead of Data Contributor: the worker could not write.
			{bicepDir + "modules/cosmos.bicep", "var dataContributorRoleId = '00000000-0000-0000-0000-000000000002'", "var dataContributorRoleId = '00000000-0000-0000-0000-000000000001'"},
			// The relay's feed reader on the whole database (today's shape: it could read every subscriber's container).
			{bicepDir + "modules/cosmos.bicep", "    roleDefinitionId: feedReaderRole.id\n    principalId: relayPrincipalId\n    scope: ordersScope", "    roleDefinitionId: feedReaderRole.id\n    principalId: relayPrincipalId\n    scope: dataScope"},
			// The relay's leases written in the orders container: it could rewrite orders.
			{bicepDir + "modules/cosmos.bicep", "var leasesScope = '${dataScope}/colls/${leasesContainerName}'", "var leasesScope = '${dataScope}/colls/${containerName}'"},
			// The loyalty subscriber writes on the whole database.
			{bicepDir + "modules/cosmos.bicep", "    principalId: loyaltyPrincipalId\n    scope: loyaltyScope", "    principalId: loyaltyPrincipalId\n    scope: dataScope"},
			// The shipping subscriber writes the loyalty subscriber's container.
			{bicepDir + "modules/cosmos.bicep", "    principalId: shippingPrincipalId\n    scope: shippingScope", "    principalId: shippingPrincipalId\n    scope: loyaltyScope"},
			// The relay lacks the database's metadata.
			{bicepDir + "modules/cosmos.bicep", "    roleDefinitionId: metadataReaderRole.id\n    principalId: relayPrincipalId\n    scope: dataScope", "    roleDefinitionId: metadataReaderRole.id\n    principalId: relayPrincipalId\n    scope: ordersScope"},
			// Subscription-wide Contributor for the worker.
			{mainFile, "// Outputs are the environment variables", "resource workerContributor 'Microsoft.Authorization/roleAssignments@2022-04-01' = {\n  name: guid(subscription().id, 'worker-contributor')\n  properties: {\n    roleDefinitionId: subscriptionResourceId('Microsoft.Authorization/roleDefinitions', 'b24988ac-6180-42a0-ab88-20f7382dd24c')\n    principalId: workerIdentity.outputs.principalId\n  }\n}\n\n// Outputs are the environment variables"},
			// The developer principal is granted nothing on Cosmos.
			{mainFile, "    logAnalyticsWorkspaceId: monitoring.outputs.id\n    developerPrincipalId: principalId\n    profile: profile\n  }\n", "    logAnalyticsWorkspaceId: monitoring.outputs.id\n    profile: profile\n  }\n"},
			// The loyalty subscriber receives from the shipping subscription.
			{bicepDir + "modules/servicebus.bicep", "  scope: loyaltySubscription\n  name: guid(loyaltySubscription.id, loyaltyPrincipalId", "  scope: shippingSubscription\n  name: guid(loyaltySubscription.id, loyaltyPrincipalId"},
			// The relay may send to every entity of the namespace.
			{bicepDir + "modules/servicebus.bicep", "  scope: topic\n  name: guid(topic.id, publisherPrincipalId", "  scope: namespace\n  name: guid(topic.id, publisherPrincipalId"},
			// The shipping subscriber runs as the loyalty subscriber's identity.
			{mainFile, "    shippingPrincipalId: shippingIdentity.outputs.principalId\n    operatorPrincipalId: orderctlIdentity.outputs.principalId\n    logAnalyticsWorkspaceId: monitoring.outputs.id\n    developerPrincipalId: principalId\n    developerPrincipalType", "    shippingPrincipalId: loyaltyIdentity.outputs.principalId\n    operatorPrincipalId: orderctlIdentity.outputs.principalId\n    logAnalyticsWorkspaceId: monitoring.outputs.id\n    developerPrincipalId: principalId\n    developerPrincipalType"},
			// orderctl may resubmit to every entity of the namespace.
			{bicepDir + "modules/servicebus.bicep", "  scope: queue\n  name: guid(queue.id, operatorPrincipalId, dataSenderRoleId)", "  scope: namespace\n  name: guid(queue.id, operatorPrincipalId, dataSenderRoleId)"},
		},
	},
	{
		name: "no subscription-wide Owner, Contributor or User Access Administrator role, no Azure custom roles, and only the Cosmos DB custom roles with their exact data actions",
		check: func(r repo) error {
			broad := map[string]string{
				ownerRoleID:                            "Owner",
				"b24988ac-6180-42a0-ab88-20f7382dd24c": "Contributor",
				"18d7d88d-d35e-4fb5-a5c3-7773c20a72d9": "User Access Administrator",
			}
			for path, text := range r {
				for id, name := range broad {
					if strings.Contains(strings.ToLower(text), id) {
						return fmt.Errorf("%s grants %s (%s)", path, name, id)
					}
				}
				if strings.Contains(text, "Microsoft.Authorization/roleDefinitions@") {
					return fmt.Errorf("%s defines a custom role", path)
				}
			}
			b, err := parse(r)
			if err != nil {
				return err
			}
			return checkCustomRoles(b)
		},
		mutations: []mutation{
			// Owner in place of Data Owner for the scaler (also breaks the grants rule).
			{bicepDir + "modules/servicebus.bicep", "var dataOwnerRoleId = '090c5cfd-751d-490a-894a-3ce6f1109419'", "var dataOwnerRoleId = '" + ownerRoleID + "'"},
			// Only this rule: an Owner id anywhere, in upper case, even unused.
			{bicepDir + "modules/servicebus.bicep", "var dataOwnerRoleId = '090c5cfd-751d-490a-894a-3ce6f1109419'\n", "var dataOwnerRoleId = '090c5cfd-751d-490a-894a-3ce6f1109419'\nvar ownerRoleId = '" + strings.ToUpper(ownerRoleID) + "'\n"},
			// Only this rule: User Access Administrator, unused.
			{bicepDir + "modules/registry.bicep", "var acrPullRoleId = '7f951dda-4ed3-4680-a7ca-43fe172d538d'\n", "var acrPullRoleId = '7f951dda-4ed3-4680-a7ca-43fe172d538d'\nvar uaaRoleId = '18d7d88d-d35e-4fb5-a5c3-7773c20a72d9'\n"},
			{bicepDir + "modules/cosmos.bicep", "@description('Account endpoint", "resource anything 'Microsoft.DocumentDB/databaseAccounts/sqlRoleDefinitions@2024-11-15' = {\n  parent: account\n  name: guid('all')\n}\n\n@description('Account endpoint"},
			// The relay's reader may also write items.
			{bicepDir + "modules/cosmos.bicep", "  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/readChangeFeed'\n]", "  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/readChangeFeed'\n  'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/replace'\n]"},
			// The metadata reader may read every item.
			{bicepDir + "modules/cosmos.bicep", "        dataActions: [\n          readMetadataAction\n        ]", "        dataActions: [\n          readMetadataAction\n          'Microsoft.DocumentDB/databaseAccounts/sqlDatabases/containers/items/read'\n        ]"},
		},
	},
	{
		name: "main.bicep outputs every variable the programs and azd read",
		check: bicepRule(func(b *bicep) error {
			outs := map[string]decl{}
			upperSnake := regexp.MustCompile(`^[A-Z][A-Z0-9]*(_[A-Z0-9]+)*$`)
			for _, o := range b.all(infra.Output, "") {
				if o.file != mainFile {
					continue
				}
				if !upperSnake.MatchString(o.Name) {
					return fmt.Errorf("%v: output name is not UPPER_SNAKE", o)
				}
				outs[o.Name] = o
			}
			for _, name := range requiredOutputs {
				if _, ok := outs[name]; !ok {
					return fmt.Errorf("main.bicep lacks output %s", name)
				}
			}
			// The SDK wants the namespace's host and the account's endpoint.
			if v := outs["SERVICEBUS_NAMESPACE"].Value; !strings.Contains(moduleOutput(b, v), "serviceBusEndpoint") {
				return fmt.Errorf("SERVICEBUS_NAMESPACE = %s is not derived from the namespace's serviceBusEndpoint", v)
			}
			if v := outs["COSMOS_ENDPOINT"].Value; !strings.Contains(moduleOutput(b, v), "documentEndpoint") {
				return fmt.Errorf("COSMOS_ENDPOINT = %s is not the account's documentEndpoint", v)
			}
			// The queue settings the worker is told must be the ones deployed.
			for out, param := range map[string]string{
				"SERVICEBUS_LOCK_DURATION":              "lockDuration",
				"SERVICEBUS_MAX_DELIVERY_COUNT":         "maxDeliveryCount",
				"SERVICEBUS_DUPLICATE_DETECTION_WINDOW": "duplicateDetectionWindow",
				"SERVICEBUS_MESSAGE_TTL":                "messageTimeToLive",
			} {
				if v := outs[out].Value; v != param {
					return fmt.Errorf("output %s = %s, want %s", out, v, param)
				}
			}
			return nil
		}),
		mutations: []mutation{
			{mainFile, "output COSMOS_ENDPOINT string = cosmos.outputs.endpoint\n", ""},
			{mainFile, "output SERVICEBUS_QUEUE string", "output SERVICEBUS_QUEUE_NAME string"},
			{mainFile, "output SERVICEBUS_NAMESPACE string = serviceBus.outputs.host", "output SERVICEBUS_NAMESPACE string = serviceBus.outputs.name"},
			{mainFile, "output SERVICEBUS_LOCK_DURATION string = lockDuration", "output SERVICEBUS_LOCK_DURATION string = 'PT1M'"},
			{mainFile, "output AZURE_CONTAINER_REGISTRY_ENDPOINT", "output azureContainerRegistryEndpoint"},
		},
	},
	{
		name: "each container gets exactly its environment and its own identity",
		check: bicepRule(func(b *bicep) error {
			for _, app := range []struct {
				typ, service, identity string
				env                    []string
			}{
				{"Microsoft.App/containerApps", "worker", "workerIdentity", workerEnv},
				{"Microsoft.App/jobs", "producer", "producerIdentity", producerEnv},
				{"Microsoft.App/containerApps", "relay", "relayIdentity", relayEnv},
				{"Microsoft.App/containerApps", "loyalty", "loyaltyIdentity", subscriberEnv},
				{"Microsoft.App/containerApps", "shipping", "shippingIdentity", subscriberEnv},
				{"Microsoft.App/jobs", "orderctl", "orderctlIdentity", orderctlEnv},
				{"Microsoft.App/jobs", "audit", "auditIdentity", auditEnv},
			} {
				d, err := serviceResource(b, app.typ, app.service)
				if err != nil {
					return err
				}
				env, err := containerEnv(d)
				if err != nil {
					return err
				}
				var names []string
				for n := range env {
					names = append(names, n)
				}
				sort.Strings(names)
				wantNames := append([]string(nil), app.env...)
				sort.Strings(wantNames)
				if strings.Join(names, " ") != strings.Join(wantNames, " ") {
					return fmt.Errorf("%v: env %v, want exactly %v", d, names, wantNames)
				}
				if env["LOG_FORMAT"] != "'json'" {
					return fmt.Errorf("%v: LOG_FORMAT = %s, want 'json'", d, env["LOG_FORMAT"])
				}
				// AZURE_CLIENT_ID is a module param that main.bicep must wire
				// to this app's own identity.
				v, err := b.moduleParam("modules/containerapps.bicep", env["AZURE_CLIENT_ID"])
				if err != nil {
					return err
				}
				if v != app.identity+".outputs.clientId" {
					return fmt.Errorf("%s AZURE_CLIENT_ID is %s, want %s.outputs.clientId", app.service, v, app.identity)
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "              name: 'SERVICEBUS_QUEUE'\n              value: queueName\n            }\n            {\n              name: 'COSMOS_ENDPOINT'\n              value: cosmosEndpoint\n            }\n", "              name: 'SERVICEBUS_QUEUE'\n              value: queueName\n            }\n"},
			{bicepDir + "modules/containerapps.bicep", "              name: 'AZURE_CLIENT_ID'\n              value: relayClientId", "              name: 'AZURE_CLIENT_ID'\n              value: workerClientId"},
			{mainFile, "shippingClientId: shippingIdentity.outputs.clientId", "shippingClientId: loyaltyIdentity.outputs.clientId"},
			{bicepDir + "modules/containerapps.bicep", "              name: 'AZURE_CLIENT_ID'\n              value: workerClientId", "              name: 'AZURE_CLIENT_ID'\n              value: producerClientId"},
			{mainFile, "workerClientId: workerIdentity.outputs.clientId", "workerClientId: scalerIdentity.outputs.clientId"},
			{bicepDir + "modules/containerapps.bicep", "              name: 'SERVICEBUS_QUEUE'\n              value: queueName\n            }\n            {\n              name: 'LOG_FORMAT'", "              name: 'SERVICEBUS_QUEUE'\n              value: queueName\n            }\n            {\n              name: 'COSMOS_ENDPOINT'\n              value: cosmosEndpoint\n            }\n            {\n              name: 'LOG_FORMAT'"},
			{bicepDir + "modules/containerapps.bicep", "'azd-service-name': 'worker'", "'azd-service-name': 'orderworker'"},
		},
	},
	{
		name: "the worker scales on queue length through KEDA with the scaler identity",
		check: bicepRule(func(b *bicep) error {
			w, err := serviceResource(b, "Microsoft.App/containerApps", "worker")
			if err != nil {
				return err
			}
			rulesExpr, err := get(w, "properties.template.scale.rules")
			if err != nil {
				return err
			}
			rs, err := infra.ParseArray(rulesExpr)
			if err != nil {
				return err
			}
			if len(rs) != 1 {
				return fmt.Errorf("%v: %d scale rules, want 1", w, len(rs))
			}
			custom, ok := infra.Lookup(rs[0], "custom")
			if !ok {
				return fmt.Errorf("%v: scale rule is not a custom (KEDA) rule", w)
			}
			for path, expr := range map[string]string{
				"type":               "'azure-servicebus'",
				"metadata.queueName": "queueName",
				"metadata.namespace": "serviceBusNamespaceName",
			} {
				if v, _ := infra.Lookup(custom, path); v != expr {
					return fmt.Errorf("%v: scale rule %s = %q, want %s", w, path, v, expr)
				}
			}
			if _, ok := infra.Lookup(custom, "auth"); ok {
				return fmt.Errorf("%v: scale rule authenticates with a secret", w)
			}
			id, _ := infra.Lookup(custom, "identity")
			if id == "" {
				return fmt.Errorf("%v: scale rule has no identity", w)
			}
			v, err := b.moduleParam("modules/containerapps.bicep", id)
			if err != nil {
				return err
			}
			if v != "scalerIdentity.outputs.id" {
				return fmt.Errorf("scale rule identity is %s, want scalerIdentity.outputs.id", v)
			}
			ids, err := get(w, "identity.userAssignedIdentities")
			if err != nil {
				return err
			}
			if _, ok := infra.Lookup(ids, "${"+id+"}"); !ok {
				return fmt.Errorf("%v: scale rule identity %s is not attached to the app", w, id)
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", workerScaleRule, strings.Replace(workerScaleRule, "identity: scalerIdentityId", "identity: workerIdentityId", 1)},
			{bicepDir + "modules/containerapps.bicep", workerScaleRule, strings.Replace(workerScaleRule, "              identity: scalerIdentityId\n", "", 1)},
			{bicepDir + "modules/containerapps.bicep", workerScaleRule, strings.Replace(workerScaleRule, "type: 'azure-servicebus'", "type: 'azure-queue'", 1)},
			{bicepDir + "modules/containerapps.bicep", "      '${workerIdentityId}': {}\n      '${scalerIdentityId}': {}\n", "      '${workerIdentityId}': {}\n"},
			{mainFile, "scalerIdentityId: scalerIdentity.outputs.id", "scalerIdentityId: workerIdentity.outputs.id"},
		},
	},
	{
		name: "API versions are not older than the pinned table",
		check: bicepRule(func(b *bicep) error {
			for _, r := range b.all(infra.Resource, "") {
				min, ok := minAPIVersions[strings.ToLower(r.Type)]
				if !ok {
					return fmt.Errorf("%v: resource type %s has no pinned minimum API version; add it to minAPIVersions", r, r.Type)
				}
				if !apiVersionAtLeast(r.APIVersion, min) {
					return fmt.Errorf("%v: %s@%s is older than the pinned %s", r, r.Type, r.APIVersion, min)
				}
			}
			return nil
		}),
		mutations: []mutation{
			{bicepDir + "modules/servicebus.bicep", "'Microsoft.ServiceBus/namespaces/queues@2024-01-01'", "'Microsoft.ServiceBus/namespaces/queues@2021-11-01'"},
			{bicepDir + "modules/cosmos.bicep", "'Microsoft.DocumentDB/databaseAccounts@2025-04-15'", "'Microsoft.DocumentDB/databaseAccounts@2025-04-15-preview'"},
			{bicepDir + "modules/cosmos.bicep", "resource relayWritesLeases 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2024-11-15'", "resource relayWritesLeases 'Microsoft.DocumentDB/databaseAccounts/sqlRoleAssignments@2023-04-15'"},
			// The managed OpenTelemetry agent needs the preview API.
			{bicepDir + "modules/containerapps.bicep", "'Microsoft.App/managedEnvironments@2025-10-02-preview'", "'Microsoft.App/managedEnvironments@2025-07-01'"},
			{bicepDir + "modules/containerapps.bicep", "resource worker 'Microsoft.App/containerApps@2025-01-01'", "resource worker 'Microsoft.App/containerApps@2024-03-01'"},
			{bicepDir + "modules/monitoring.bicep", "Microsoft.OperationalInsights/workspaces@2023-09-01", "Microsoft.OperationalInsights/clusters@2023-09-01"},
		},
	},
	{
		name: "no keys, connection strings or secrets anywhere",
		check: func(r repo) error {
			// Key material, and the emulator-only settings that must never
			// reach Azure (they would turn key auth or TLS skipping on).
			b, err := parse(r)
			if err != nil {
				return err
			}
			allowed, err := appInsightsConnectionStrings(b)
			if err != nil {
				return err
			}
			for path, text := range r {
				text = withoutLines(text, allowed[path])
				if m := findForbidden(text); m != nil {
					line := strings.Count(text[:m[0]], "\n") + 1
					return fmt.Errorf("%s:%d: %q", path, line, text[m[0]:m[1]])
				}
			}
			regs, err := b.created("Microsoft.ContainerRegistry/registries")
			if err != nil {
				return err
			}
			for _, reg := range regs {
				if err := want(reg, "properties.adminUserEnabled", "false"); err != nil {
					return err
				}
			}
			return nil
		},
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "      destination: 'azure-monitor'\n", "      destination: 'log-analytics'\n      logAnalyticsConfiguration: {\n        customerId: workspace.properties.customerId\n        sharedKey: workspace.listKeys().primarySharedKey\n      }\n"},
			{mainFile, "output COSMOS_CONTAINER string", "output COSMOS_KEY string = 'x'\noutput COSMOS_CONTAINER string"},
			{bicepDir + "modules/containerapps.bicep", "              name: 'OTEL_SERVICE_NAME'\n              value: 'orderworker'\n            }\n", "              name: 'OTEL_SERVICE_NAME'\n              value: 'orderworker'\n            }\n            {\n              name: 'COSMOS_INSECURE_SKIP_VERIFY'\n              value: 'true'\n            }\n"},
			// The environment's connection string from anywhere but the
			// Application Insights component (a pasted literal).
			{bicepDir + "modules/containerapps.bicep", "connectionString: appInsights.properties.ConnectionString", "connectionString: 'InstrumentationKey=00000000-0000-0000-0000-000000000000'"},
			// The connection string passed on as an output.
			{bicepDir + "modules/monitoring.bicep", "@description('Workspace name, for", "output appInsightsConnection string = appInsights.properties.ConnectionString\n\n@description('Workspace name, for"},
			{bicepDir + "modules/servicebus.bicep", "@description('Queue name.')\noutput", "output SERVICEBUS_CONNECTION_STRING string = 'Endpoint=sb://x;SharedAccessKeyName=y;SharedAccessKey=z'\n\n@description('Queue name.')\noutput"},
			{bicepDir + "modules/registry.bicep", "adminUserEnabled: false", "adminUserEnabled: true"},
		},
	},
	{
		name: "azd conventions: subscription scope, resource group, tags, services",
		check: func(r repo) error {
			b, err := parse(r)
			if err != nil {
				return err
			}
			if !regexp.MustCompile(`(?m)^targetScope = 'subscription'$`).MatchString(r[mainFile]) {
				return errors.New("main.bicep is not at subscription scope")
			}
			rgs, err := b.created("Microsoft.Resources/resourceGroups")
			if err != nil {
				return err
			}
			if err := want(rgs[0], "tags", "tags"); err != nil {
				return err
			}
			tags, ok := b.find(mainFile, infra.Var, "tags")
			if !ok {
				return errors.New("main.bicep has no tags var")
			}
			if v, _ := infra.Lookup(tags.Value, "azd-env-name"); v != "environmentName" {
				return fmt.Errorf("tags var: azd-env-name = %q, want environmentName", v)
			}
			token, ok := b.find(mainFile, infra.Var, "resourceToken")
			if !ok || !strings.Contains(token.Value, "uniqueString(subscription().id, environmentName, location)") {
				return errors.New("main.bicep has no azd-style resourceToken")
			}
			for _, svc := range []string{"worker", "producer", "relay", "loyalty", "shipping", "orderctl", "audit"} {
				if _, err := serviceResource(b, "", svc); err != nil {
					return err
				}
			}
			if err := checkParametersFile(b, r[bicepDir+"main.parameters.json"]); err != nil {
				return err
			}
			return checkAzureYAML(r["azure.yaml"])
		},
		mutations: []mutation{
			{mainFile, "targetScope = 'subscription'", "targetScope = 'resourceGroup'"},
			{mainFile, "  'azd-env-name': environmentName", "  env: environmentName"},
			{"azure.yaml", "  path: infra/bicep", "  path: infra"},
			{bicepDir + "main.parameters.json", `"location": {`, `"region": {`},
			{bicepDir + "main.parameters.json", `"${SERVICE_WORKER_RESOURCE_EXISTS=false}"`, `"false"`},
			{"azure.yaml", "  producer:\n", "  orderproducer:\n"},
			{"azure.yaml", "- CMD=orderproducer", "- CMD=orderworker"},
			{"azure.yaml", "- CMD=orderrelay", "- CMD=orderworker"},
			{bicepDir + "main.parameters.json", `"${SERVICE_RELAY_RESOURCE_EXISTS=false}"`, `"false"`},
			{bicepDir + "modules/containerapps.bicep", "'azd-service-name': 'producer'", "'azd-service-name': 'job'"},
		},
	},
	{
		name: "the Dockerfile builds a static binary into a small non-root image",
		check: func(r repo) error {
			df := r["Dockerfile"]
			stages := regexp.MustCompile(`(?m)^FROM\s+(?:--platform=\S+\s+)?(\S+)`).FindAllStringSubmatch(df, -1)
			if len(stages) < 2 {
				return fmt.Errorf("Dockerfile has %d stages, want a multi-stage build", len(stages))
			}
			final := stages[len(stages)-1][1]
			if !strings.Contains(final, "distroless/static") && final != "scratch" {
				return fmt.Errorf("final image %s is not distroless/static or scratch", final)
			}
			if !strings.Contains(df, "CGO_ENABLED=0") {
				return errors.New("Dockerfile does not build with CGO_ENABLED=0")
			}
			users := regexp.MustCompile(`(?m)^USER\s+(\S+)`).FindAllStringSubmatch(df, -1)
			if len(users) == 0 {
				return errors.New("Dockerfile sets no USER: the image would run as root")
			}
			if u := users[len(users)-1][1]; u == "root" || u == "0" || strings.HasPrefix(u, "0:") || strings.HasPrefix(u, "root:") || strings.HasSuffix(u, ":0") || strings.HasSuffix(u, ":root") {
				return fmt.Errorf("Dockerfile runs as %s", u)
			}
			// Every command is built (the relay, orderctl and whatever
			// azure.yaml names), and CMD, defaulting to the worker, picks
			// the entrypoint.
			build := regexp.MustCompile(`(?m)go build [^\n]*-o /out/bin/ \./cmd/\.\.\.$`).FindStringIndex(df)
			if build == nil {
				return errors.New("Dockerfile does not build every command (go build -o /out/bin/ ./cmd/...)")
			}
			arg := regexp.MustCompile(`(?m)^ARG CMD=orderworker$`).FindStringIndex(df)
			if arg == nil || !strings.Contains(df, `cp "/out/bin/${CMD}" /out/app`) || !strings.Contains(df, "COPY --from=build /out/app /app") {
				return errors.New("Dockerfile does not run /out/bin/${CMD} as /app with CMD defaulting to orderworker")
			}
			if arg[0] < build[0] {
				return errors.New("Dockerfile declares ARG CMD before the build: each service would rebuild every command")
			}
			return nil
		},
		mutations: []mutation{
			{"Dockerfile", "USER 65532:65532\n", ""},
			{"Dockerfile", "USER 65532:65532", "USER root"},
			{"Dockerfile", "USER 65532:65532", "USER 65532:0"},
			{"Dockerfile", "CGO_ENABLED=0", "CGO_ENABLED=1"},
			{"Dockerfile", "FROM scratch", "FROM debian:12.8"},
			{"Dockerfile", "ARG CMD=orderworker", "ARG CMD=orderproducer"},
			{"Dockerfile", "-o /out/bin/ ./cmd/...", "-o /out/bin/ ./cmd/orderworker ./cmd/orderproducer"},
			{"Dockerfile", "ARG CMD=orderworker\n", ""},
		},
	},
}

// requiredOutputs are the environment variables cmd/orderworker and
// cmd/orderproducer read, plus those azd needs to deploy.
var requiredOutputs = []string{
	"AZURE_LOCATION",
	"AZURE_TENANT_ID",
	"AZURE_RESOURCE_GROUP",
	"AZURE_CONTAINER_REGISTRY_ENDPOINT",
	"SERVICEBUS_NAMESPACE",
	"SERVICEBUS_QUEUE",
	"SERVICEBUS_LOCK_DURATION",
	"SERVICEBUS_MAX_DELIVERY_COUNT",
	"SERVICEBUS_DUPLICATE_DETECTION_WINDOW",
	"SERVICEBUS_MESSAGE_TTL",
	"COSMOS_ENDPOINT",
	"COSMOS_DATABASE",
	"COSMOS_CONTAINER",
	"SERVICEBUS_TOPIC",
	"SERVICEBUS_LOYALTY_SUBSCRIPTION",
	"SERVICEBUS_SHIPPING_SUBSCRIPTION",
}

var workerEnv = []string{
	"AZURE_CLIENT_ID",
	"SERVICEBUS_NAMESPACE",
	"SERVICEBUS_QUEUE",
	"COSMOS_ENDPOINT",
	"COSMOS_DATABASE",
	"COSMOS_CONTAINER",
	"SERVICEBUS_LOCK_DURATION",
	"SERVICEBUS_MAX_DELIVERY_COUNT",
	"SERVICEBUS_DUPLICATE_DETECTION_WINDOW",
	"SERVICEBUS_MESSAGE_TTL",
	"LOG_FORMAT",
	"OTEL_SERVICE_NAME",
	"OTEL_METRICS_EXPORTER",
	"OTEL_TRACES_SAMPLER",
	"OTEL_TRACES_SAMPLER_ARG",
	"WORKER_HEALTH_ADDR",
	"WORKER_SHUTDOWN_GRACE",
	"OTEL_LOGS_EXPORTER",
	"GOGC",
	"GOMEMLIMIT",
}

// relayEnv is what orderrelay reads: the orders container whose change feed
// it follows, the leases container of its lease documents, and the topic it
// publishes to.
var relayEnv = []string{
	"AZURE_CLIENT_ID",
	"SERVICEBUS_NAMESPACE",
	"SERVICEBUS_TOPIC",
	"COSMOS_ENDPOINT",
	"COSMOS_DATABASE",
	"COSMOS_CONTAINER",
	"COSMOS_LEASES_CONTAINER",
	"LOG_FORMAT",
	"OTEL_SERVICE_NAME",
	"OTEL_METRICS_EXPORTER",
	"RELAY_HEALTH_ADDR",
	"OTEL_LOGS_EXPORTER",
	"GOGC",
	"GOMEMLIMIT",
}

// subscriberEnv is the worker's, receiving from a topic subscription in inbox
// mode instead of from the queue.
var subscriberEnv = []string{
	"AZURE_CLIENT_ID",
	"SERVICEBUS_NAMESPACE",
	"SERVICEBUS_TOPIC",
	"SERVICEBUS_SUBSCRIPTION",
	"WORKER_INBOX_CONSUMER",
	"COSMOS_ENDPOINT",
	"COSMOS_DATABASE",
	"COSMOS_CONTAINER",
	"SERVICEBUS_LOCK_DURATION",
	"SERVICEBUS_MAX_DELIVERY_COUNT",
	"SERVICEBUS_DUPLICATE_DETECTION_WINDOW",
	"SERVICEBUS_MESSAGE_TTL",
	"LOG_FORMAT",
	"OTEL_SERVICE_NAME",
	"OTEL_METRICS_EXPORTER",
	"WORKER_HEALTH_ADDR",
	"WORKER_SHUTDOWN_GRACE",
	"OTEL_LOGS_EXPORTER",
	"GOGC",
	"GOMEMLIMIT",
}

// orderctlEnv is what orderctl reads in Azure: the queue and its settings
// (for the resubmission window and horizon) and the orders container (for
// `dlq show`). A subscription's dead-letter queue is chosen with -topic and
// -subscription in the job's args.
var orderctlEnv = []string{
	"AZURE_CLIENT_ID",
	"SERVICEBUS_NAMESPACE",
	"SERVICEBUS_QUEUE",
	"SERVICEBUS_LOCK_DURATION",
	"SERVICEBUS_DUPLICATE_DETECTION_WINDOW",
	"SERVICEBUS_MESSAGE_TTL",
	"COSMOS_ENDPOINT",
	"COSMOS_DATABASE",
	"COSMOS_CONTAINER",
	"LOG_FORMAT",
	"OTEL_METRICS_EXPORTER",
	"OTEL_LOGS_EXPORTER",
	"GOGC",
	"GOMEMLIMIT",
}

// auditEnv is what `orderctl audit` reads in Azure (cmd/orderctl/audit.go):
// the database and its containers (orders, the relay's leases, each inbox
// consumer's markers through AUDIT_CONSUMERS), and the queue's timings, from
// which it derives the redelivery horizon. No Service Bus namespace: the
// audit's identity holds no Service Bus role.
var auditEnv = []string{
	"AZURE_CLIENT_ID",
	"COSMOS_ENDPOINT",
	"COSMOS_DATABASE",
	"COSMOS_CONTAINER",
	"COSMOS_LEASES_CONTAINER",
	"AUDIT_CONSUMERS",
	"SERVICEBUS_LOCK_DURATION",
	"SERVICEBUS_DUPLICATE_DETECTION_WINDOW",
	"SERVICEBUS_MESSAGE_TTL",
	"LOG_FORMAT",
	"OTEL_METRICS_EXPORTER",
	"OTEL_LOGS_EXPORTER",
	"GOGC",
	"GOMEMLIMIT",
}

var producerEnv = []string{
	"AZURE_CLIENT_ID",
	"SERVICEBUS_NAMESPACE",
	"SERVICEBUS_QUEUE",
	"LOG_FORMAT",
	"OTEL_METRICS_EXPORTER",
	"OTEL_LOGS_EXPORTER",
	"GOGC",
	"GOMEMLIMIT",
}

// minAPIVersions pins the oldest API version each resource type may use
// (DESIGN.md §7). A resource type not listed here fails the rule, so a new
// resource cannot arrive without a pinned version.
var minAPIVersions = map[string]string{
	"microsoft.resources/resourcegroups":                            "2024-03-01",
	"microsoft.managedidentity/userassignedidentities":              "2023-01-31",
	"microsoft.servicebus/namespaces":                               "2024-01-01",
	"microsoft.servicebus/namespaces/queues":                        "2024-01-01",
	"microsoft.servicebus/namespaces/topics":                        "2024-01-01",
	"microsoft.servicebus/namespaces/topics/subscriptions":          "2024-01-01",
	"microsoft.documentdb/databaseaccounts":                         "2025-04-15",
	"microsoft.documentdb/databaseaccounts/sqldatabases":            "2025-04-15",
	"microsoft.documentdb/databaseaccounts/sqldatabases/containers": "2025-04-15",
	"microsoft.documentdb/databaseaccounts/sqlroleassignments":      "2024-11-15",
	"microsoft.documentdb/databaseaccounts/sqlroledefinitions":      "2024-11-15",
	"microsoft.authorization/roleassignments":                       "2022-04-01",
	"microsoft.containerregistry/registries":                        "2023-07-01",
	"microsoft.operationalinsights/workspaces":                      "2023-09-01",
	"microsoft.app/managedenvironments":                             "2025-10-02-preview",
	"microsoft.app/containerapps":                                   "2025-01-01",
	"microsoft.app/jobs":                                            "2025-01-01",
	"microsoft.insights/diagnosticsettings":                         "2021-05-01-preview",
	"microsoft.insights/components":                                 "2020-02-02",
	"microsoft.insights/actiongroups":                               "2023-01-01",
	"microsoft.insights/metricalerts":                               "2018-03-01",
	"microsoft.insights/scheduledqueryrules":                        "2023-12-01",
	"microsoft.network/virtualnetworks":                             "2024-07-01",
	"microsoft.network/networksecuritygroups":                       "2024-07-01",
	"microsoft.network/privateendpoints":                            "2024-07-01",
	"microsoft.network/privateendpoints/privatednszonegroups":       "2024-07-01",
	"microsoft.network/privatednszones":                             "2024-06-01",
	"microsoft.network/privatednszones/virtualnetworklinks":         "2024-06-01",
	"microsoft.consumption/budgets":                                 "2024-08-01",
}

// apiVersionAtLeast compares API versions such as 2024-01-01 and
// 2021-05-01-preview: by date, and at the same date a preview is older than
// the stable release.
func apiVersionAtLeast(v, min string) bool {
	vDate, vPreview := strings.CutSuffix(v, "-preview")
	mDate, mPreview := strings.CutSuffix(min, "-preview")
	if vDate != mDate {
		return vDate > mDate
	}
	return !vPreview || mPreview
}

// moduleOutput resolves an expression of the form sym.outputs.name in
// main.bicep to the value of that output in the module's template.
func moduleOutput(b *bicep, expr string) string {
	sym, out, ok := strings.Cut(expr, ".outputs.")
	if !ok {
		return ""
	}
	m, ok := b.find(mainFile, infra.Module, sym)
	if !ok {
		return ""
	}
	o, ok := b.find(bicepDir+m.Type, infra.Output, out)
	if !ok {
		return ""
	}
	return o.Value
}

// serviceResource returns the resource tagged azd-service-name: service,
// optionally restricted to type typ.
func serviceResource(b *bicep, typ, service string) (decl, error) {
	var found []decl
	for _, r := range b.all(infra.Resource, typ) {
		if r.Existing {
			continue
		}
		tags, ok := infra.Lookup(r.Body, "tags")
		if !ok {
			continue
		}
		if strings.Contains(tags, "'azd-service-name': '"+service+"'") {
			found = append(found, r)
		}
	}
	if len(found) != 1 {
		return decl{}, fmt.Errorf("%d resources tagged azd-service-name %q, want 1", len(found), service)
	}
	return found[0], nil
}

// containerEnv returns name -> value expression of the env of the single
// container in an app or job.
func containerEnv(d decl) (map[string]string, error) {
	cs, err := get(d, "properties.template.containers")
	if err != nil {
		return nil, err
	}
	containers, err := infra.ParseArray(cs)
	if err != nil {
		return nil, err
	}
	if len(containers) != 1 {
		return nil, fmt.Errorf("%v: %d containers, want 1", d, len(containers))
	}
	envExpr, ok := infra.Lookup(containers[0], "env")
	if !ok {
		return nil, fmt.Errorf("%v: container has no env", d)
	}
	items, err := infra.ParseArray(envExpr)
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, it := range items {
		n, _ := infra.Lookup(it, "name")
		name, ok := infra.Unquote(n)
		if !ok {
			return nil, fmt.Errorf("%v: env name %s is not a literal", d, n)
		}
		if _, dup := env[name]; dup {
			return nil, fmt.Errorf("%v: env %s set twice", d, name)
		}
		v, ok := infra.Lookup(it, "value")
		if !ok {
			return nil, fmt.Errorf("%v: env %s has no plain value", d, name)
		}
		env[name] = v
	}
	return env, nil
}

// checkParametersFile checks main.parameters.json against main.bicep: every
// parameter without a default is supplied, nothing is supplied that main.bicep
// does not declare, and the azd-managed parameters come from azd's variables.
func checkParametersFile(b *bicep, text string) error {
	var f struct {
		Parameters map[string]struct {
			Value any `json:"value"`
		} `json:"parameters"`
	}
	if err := json.Unmarshal([]byte(text), &f); err != nil {
		return fmt.Errorf("main.parameters.json: %w", err)
	}
	declared := map[string]bool{}
	for _, p := range b.all(infra.Param, "") {
		if p.file != mainFile {
			continue
		}
		declared[p.Name] = true
		if _, ok := f.Parameters[p.Name]; !ok && p.Value == "" {
			return fmt.Errorf("main.parameters.json does not supply %s, which has no default", p.Name)
		}
	}
	for name := range f.Parameters {
		if !declared[name] {
			return fmt.Errorf("main.parameters.json supplies %s, which main.bicep does not declare", name)
		}
	}
	for name, v := range map[string]string{
		"environmentName": "${AZURE_ENV_NAME}",
		"location":        "${AZURE_LOCATION}",
		"principalId":     "${AZURE_PRINCIPAL_ID}",
		"workerExists":    "${SERVICE_WORKER_RESOURCE_EXISTS=false}",
		"relayExists":     "${SERVICE_RELAY_RESOURCE_EXISTS=false}",
		"loyaltyExists":   "${SERVICE_LOYALTY_RESOURCE_EXISTS=false}",
		"shippingExists":  "${SERVICE_SHIPPING_RESOURCE_EXISTS=false}",
		"alertEmail":      "${ALERT_EMAIL=}",
	} {
		if got := f.Parameters[name].Value; got != v {
			return fmt.Errorf("main.parameters.json: %s = %v, want %s", name, got, v)
		}
	}
	return nil
}

// checkAzureYAML checks the few lines of azure.yaml that tie it to the
// templates. A YAML library is not a dependency of this module, so the check
// reads the file's lines: infra path, and one containerapp service per
// Dockerfile command, each built with its CMD.
func checkAzureYAML(text string) error {
	for _, re := range []string{
		`(?m)^infra:\n(?:  .*\n)*  provider: bicep$`,
		`(?m)^infra:\n(?:  .*\n)*  path: infra/bicep$`,
		`(?m)^services:\n(?:  .*\n)*  worker:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderworker$`,
		`(?m)^services:\n(?:  .*\n)*  producer:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderproducer$`,
		`(?m)^services:\n(?:  .*\n)*  relay:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderrelay$`,
		`(?m)^services:\n(?:  .*\n)*  loyalty:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderworker$`,
		`(?m)^services:\n(?:  .*\n)*  shipping:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderworker$`,
		`(?m)^services:\n(?:  .*\n)*  orderctl:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderctl$`,
		// The audit job runs orderctl too, as a service of its own: azd sets
		// the image of one resource per service.
		`(?m)^services:\n(?:  .*\n)*  audit:\n(?:    .*\n)*?    host: containerapp\n(?:    .*\n)*?        - CMD=orderctl$`,
	} {
		if !regexp.MustCompile(re).MatchString(text) {
			return fmt.Errorf("azure.yaml does not match %s", re)
		}
	}
	return nil
}

func TestRules(t *testing.T) {
	r := loadRepo(t)
	for _, rl := range allRules() {
		t.Run(rl.name, func(t *testing.T) {
			if err := rl.check(r); err != nil {
				t.Error(err)
			}
		})
	}
}

// TestRulesCatch runs each rule over copies of the files with one deliberate
// mutation each and requires the rule to fail on every one. It also runs
// every other rule over each mutated copy, and requires each rule to have at
// least one mutation that breaks it alone: a rule that only ever fails
// together with another could be vacuous without anyone noticing.
func TestRulesCatch(t *testing.T) {
	r := loadRepo(t)
	all := allRules()
	for _, rl := range all {
		if len(rl.mutations) == 0 {
			t.Errorf("rule %q has no mutation proving it can fail", rl.name)
			continue
		}
		isolated := 0
		for i, m := range rl.mutations {
			t.Run(fmt.Sprintf("%s/%d", rl.name, i), func(t *testing.T) {
				mutated := mutate(t, r, m)
				err := rl.check(mutated)
				if err == nil {
					t.Fatalf("rule passed after replacing %q with %q in %s", m.old, m.new, m.file)
				}
				t.Logf("caught: %v", err)
				var others []string
				for _, o := range all {
					if o.name != rl.name && o.check(mutated) != nil {
						others = append(others, o.name)
					}
				}
				if len(others) == 0 {
					isolated++
				} else {
					t.Logf("also breaks: %q", others)
				}
			})
		}
		if isolated == 0 {
			t.Errorf("rule %q: no mutation breaks it alone; add one that breaks exactly this rule", rl.name)
		}
	}
}

// mutate returns a copy of r with m applied, failing unless m.old occurs
// exactly once and the result still parses.
func mutate(t *testing.T, r repo, m mutation) repo {
	t.Helper()
	text, ok := r[m.file]
	if !ok {
		t.Fatalf("no file %s", m.file)
	}
	if n := strings.Count(text, m.old); n != 1 {
		t.Fatalf("%s contains %q %d times, want once: update the mutation", m.file, m.old, n)
	}
	mutated := repo{}
	for k, v := range r {
		mutated[k] = v
	}
	mutated[m.file] = strings.Replace(text, m.old, m.new, 1)
	// The mutation must leave readable templates, so that the rule fails on
	// its own terms and not because the text broke.
	if _, err := parse(mutated); err != nil {
		t.Fatalf("mutated templates do not parse: %v", err)
	}
	return mutated
}
