package infra_test

import (
	"fmt"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// The deployment profiles of main.bicep's profile parameter. Rules that read
// a profile-dependent value read it for each profile: profileValue resolves
// a var and picks the branch of a ternary whose condition names the profile.
var profiles = []string{"dev", "production"}

// profileConditions are the ternary conditions the templates branch on, and
// the profile in which each is true. main.bicep and the modules declare
// `var production = profile == 'production'`; containerapps.bicep knows the
// profile by the subnet it is given.
var profileConditions = map[string]string{
	"production":                     "production",
	"!production":                    "dev",
	"empty(infrastructureSubnetId)":  "dev",
	"!empty(infrastructureSubnetId)": "production",
}

// profileValue resolves expr, written in file, for profile prof: through the
// file's vars, and into the branch of each ternary on a profile condition.
func profileValue(b *bicep, file, expr, prof string) (string, error) {
	for i := 0; i < 10; i++ {
		expr = strings.TrimSpace(expr)
		if v, ok := b.find(file, infra.Var, expr); ok {
			expr = v.Value
			continue
		}
		cond, a, c, ok := infra.SplitTernary(expr)
		if !ok {
			return expr, nil
		}
		p, known := profileConditions[cond]
		if !known {
			return "", fmt.Errorf("%s: ternary on %q, which is not a profile condition", file, cond)
		}
		if p == prof {
			expr = a
		} else {
			expr = c
		}
	}
	return "", fmt.Errorf("%s: %s does not resolve", file, expr)
}

// profileGet looks up a dot-separated path in d's body for profile prof,
// resolving profile-dependent values at each step.
func profileGet(b *bicep, d decl, path, prof string) (string, error) {
	v := d.Body
	for _, key := range strings.Split(path, ".") {
		next, ok := infra.Lookup(v, key)
		if !ok {
			return "", fmt.Errorf("%v: %s profile: %s not set", d, prof, path)
		}
		r, err := profileValue(b, d.file, next, prof)
		if err != nil {
			return "", err
		}
		v = r
	}
	return v, nil
}

// profileWant checks that path in d's body is expr in profile prof.
func profileWant(b *bicep, d decl, path, prof, expr string) error {
	v, err := profileGet(b, d, path, prof)
	if err != nil {
		return err
	}
	if strings.Join(strings.Fields(v), " ") != expr {
		return fmt.Errorf("%v: %s profile: %s = %s, want %s", d, prof, path, v, expr)
	}
	return nil
}

// productionRules are the production profile's requirements.
var productionRules = []rule{
	{
		name:  "main.bicep has a profile parameter, dev by default, set from DEPLOY_PROFILE and passed to every module that branches on it",
		check: func(r repo) error { return checkProfileParam(r) },
		mutations: []mutation{
			{mainFile, "param profile string = 'dev'", "param profile string = 'production'"},
			{bicepDir + "main.parameters.json", `"${DEPLOY_PROFILE=dev}"`, `"production"`},
			{mainFile, "    developerPrincipalType: principalType\n    profile: profile\n", "    developerPrincipalType: principalType\n"},
			{mainFile, "module network 'modules/network.bicep' = if (production) {", "module network 'modules/network.bicep' = {"},
		},
	},
	{
		name:  "production: Service Bus Premium, zone-redundant, private; dev: Standard on its public endpoint",
		check: bicepRule(checkProductionServiceBus),
		mutations: []mutation{
			{bicepDir + "modules/servicebus.bicep", "    name: 'Premium'\n    tier: 'Premium'\n", "    name: 'Standard'\n    tier: 'Standard'\n"},
			{bicepDir + "modules/servicebus.bicep", "    zoneRedundant: production\n", "    zoneRedundant: false\n"},
			{bicepDir + "modules/servicebus.bicep", "    publicNetworkAccess: production ? 'Disabled' : 'Enabled'\n", "    publicNetworkAccess: 'Enabled'\n"},
		},
	},
	{
		name:  "production: Cosmos DB zone-redundant with continuous backup, autoscale throughput and no public access; dev: serverless",
		check: bicepRule(checkProductionCosmos),
		mutations: []mutation{
			{bicepDir + "modules/cosmos.bicep", "        isZoneRedundant: production\n", "        isZoneRedundant: false\n"},
			{bicepDir + "modules/cosmos.bicep", "      type: 'Continuous'\n", "      type: 'Periodic'\n"},
			{bicepDir + "modules/cosmos.bicep", "    publicNetworkAccess: production ? 'Disabled' : 'Enabled'\n", "    publicNetworkAccess: 'Enabled'\n"},
			{bicepDir + "modules/cosmos.bicep", "    options: production ? {\n", "    options: !production ? {\n"},
		},
	},
	{
		name:  "production: private endpoints and private DNS zones for Service Bus and Cosmos DB, and the environment in the virtual network",
		check: bicepRule(checkProductionNetwork),
		mutations: []mutation{
			{bicepDir + "modules/network.bicep", "    groupId: 'Sql'\n", "    groupId: 'MongoDB'\n"},
			{bicepDir + "modules/network.bicep", "    zone: 'privatelink.servicebus.windows.net'\n", "    zone: 'servicebus.windows.net'\n"},
			{bicepDir + "modules/network.bicep", "                serviceName: 'Microsoft.App/environments'\n", "                serviceName: 'Microsoft.ContainerInstance/containerGroups'\n"},
			{bicepDir + "modules/containerapps.bicep", "      infrastructureSubnetId: infrastructureSubnetId\n", ""},
			{mainFile, "    infrastructureSubnetId: production ? network.outputs.infrastructureSubnetId : ''\n", ""},
		},
	},
	{
		name:  "production: a monthly budget alert on the resource group",
		check: bicepRule(checkBudget),
		mutations: []mutation{
			{bicepDir + "modules/budget.bicep", "    timeGrain: 'Monthly'\n", "    timeGrain: 'Annually'\n"},
			{mainFile, "module budget 'modules/budget.bicep' = if (production) {", "module budget 'modules/budget.bicep' = if (false) {"},
		},
	},
}

func checkProfileParam(r repo) error {
	b, err := parse(r)
	if err != nil {
		return err
	}
	p, ok := b.find(mainFile, infra.Param, "profile")
	if !ok {
		return fmt.Errorf("main.bicep has no param profile")
	}
	if p.Value != "'dev'" || strings.Join(strings.Fields(strings.Join(p.Decorators, " ")), " ") == "" || !strings.Contains(strings.Join(strings.Fields(strings.Join(p.Decorators, " ")), " "), "@allowed([ 'dev' 'production' ])") {
		return fmt.Errorf("%v: want @allowed(['dev', 'production']) with default 'dev', got %s %v", p, p.Value, p.Decorators)
	}
	params, err := parametersFile(r[bicepDir+"main.parameters.json"])
	if err != nil {
		return err
	}
	if params["profile"] != "${DEPLOY_PROFILE=dev}" {
		return fmt.Errorf("main.parameters.json: profile = %v, want ${DEPLOY_PROFILE=dev}", params["profile"])
	}
	for _, m := range []string{"modules/servicebus.bicep", "modules/cosmos.bicep"} {
		if v, err := b.moduleParam(m, "profile"); err != nil || v != "profile" {
			return fmt.Errorf("main.bicep passes profile = %q to %s (%v), want main's profile", v, m, err)
		}
	}
	v, ok := b.find(mainFile, infra.Var, "production")
	if !ok || v.Value != "profile == 'production'" {
		return fmt.Errorf("main.bicep: var production = %q, want profile == 'production'", v.Value)
	}
	for _, m := range []string{"modules/network.bicep", "modules/budget.bicep"} {
		found := false
		for _, d := range b.all(infra.Module, m) {
			found = true
			if !strings.HasPrefix(d.Value, "if (production)") {
				return fmt.Errorf("%v: want `if (production)`: the dev profile has none", d)
			}
		}
		if !found {
			return fmt.Errorf("main.bicep does not use %s", m)
		}
	}
	return nil
}

func checkProductionServiceBus(b *bicep) error {
	nss, err := b.created("Microsoft.ServiceBus/namespaces")
	if err != nil {
		return err
	}
	for _, ns := range nss {
		for prof, want := range map[string][2]string{
			"production": {"'Premium'", "'Disabled'"},
			"dev":        {"'Standard'", "'Enabled'"},
		} {
			if err := profileWant(b, ns, "sku.name", prof, want[0]); err != nil {
				return err
			}
			if err := profileWant(b, ns, "properties.publicNetworkAccess", prof, want[1]); err != nil {
				return err
			}
		}
		// Zone-redundant exactly in production (var production).
		if v, _ := infra.Lookup(ns.Body, "properties.zoneRedundant"); v != "production" {
			return fmt.Errorf("%v: zoneRedundant = %q, want production", ns, v)
		}
	}
	return nil
}

func checkProductionCosmos(b *bicep) error {
	accts, err := b.created("Microsoft.DocumentDB/databaseAccounts")
	if err != nil {
		return err
	}
	for _, a := range accts {
		locs, err := get(a, "properties.locations")
		if err != nil {
			return err
		}
		ls, err := infra.ParseArray(locs)
		if err != nil || len(ls) != 1 {
			return fmt.Errorf("%v: want one location (%v)", a, err)
		}
		if z, _ := infra.Lookup(ls[0], "isZoneRedundant"); z != "production" {
			return fmt.Errorf("%v: isZoneRedundant = %q, want production", a, z)
		}
		if err := profileWant(b, a, "properties.backupPolicy.type", "production", "'Continuous'"); err != nil {
			return err
		}
		if err := profileWant(b, a, "properties.publicNetworkAccess", "production", "'Disabled'"); err != nil {
			return err
		}
		if err := profileWant(b, a, "properties.capabilities", "production", "[]"); err != nil {
			return err
		}
	}
	dbs, err := b.created("Microsoft.DocumentDB/databaseAccounts/sqlDatabases")
	if err != nil {
		return err
	}
	for _, d := range dbs {
		if _, err := profileGet(b, d, "properties.options.autoscaleSettings.maxThroughput", "production"); err != nil {
			return fmt.Errorf("%w: production needs provisioned (autoscale) throughput", err)
		}
		if _, err := profileGet(b, d, "properties.options.autoscaleSettings", "dev"); err == nil {
			return fmt.Errorf("%v: dev profile sets throughput on a serverless account", d)
		}
	}
	return nil
}

func checkProductionNetwork(b *bicep) error {
	const net = bicepDir + "modules/network.bicep"
	eps, ok := b.find(net, infra.Var, "endpoints")
	if !ok {
		return fmt.Errorf("network.bicep has no var endpoints")
	}
	items, err := infra.ParseArray(eps.Value)
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, it := range items {
		g, _ := infra.Lookup(it, "groupId")
		z, _ := infra.Lookup(it, "zone")
		id, _ := infra.Lookup(it, "id")
		got[g+" "+z] = id
	}
	for key, param := range map[string]string{
		"'namespace' 'privatelink.servicebus.windows.net'": "serviceBusNamespaceId",
		"'Sql' 'privatelink.documents.azure.com'":          "cosmosAccountId",
	} {
		if got[key] != param {
			return fmt.Errorf("network.bicep endpoints: %s is for %q, want %s", key, got[key], param)
		}
	}
	for _, want := range []struct{ typ, path, expr string }{
		{"Microsoft.Network/privateEndpoints", "properties.privateLinkServiceConnections", "groupIds: [ e.groupId ]"},
		{"Microsoft.Network/privateEndpoints/privateDnsZoneGroups", "properties.privateDnsZoneConfigs", "privateDnsZoneId: zones[i].id"},
		{"Microsoft.Network/privateDnsZones/virtualNetworkLinks", "properties.virtualNetwork", "id: vnet.id"},
		{"Microsoft.Network/virtualNetworks", "properties.subnets", "serviceName: 'Microsoft.App/environments'"},
	} {
		ds, err := b.created(want.typ)
		if err != nil {
			return err
		}
		v, err := get(ds[0], want.path)
		if err != nil {
			return err
		}
		if !strings.Contains(strings.Join(strings.Fields(v), " "), want.expr) {
			return fmt.Errorf("%v: %s lacks %s", ds[0], want.path, want.expr)
		}
	}
	if v, err := b.moduleParam("modules/network.bicep", "serviceBusNamespaceId"); err != nil || v != "serviceBus.outputs.id" {
		return fmt.Errorf("network serviceBusNamespaceId = %q (%v)", v, err)
	}
	if v, err := b.moduleParam("modules/network.bicep", "cosmosAccountId"); err != nil || v != "cosmos.outputs.id" {
		return fmt.Errorf("network cosmosAccountId = %q (%v)", v, err)
	}
	envs, err := b.created("Microsoft.App/managedEnvironments")
	if err != nil {
		return err
	}
	if err := profileWant(b, envs[0], "properties.vnetConfiguration.infrastructureSubnetId", "production", "infrastructureSubnetId"); err != nil {
		return err
	}
	if err := profileWant(b, envs[0], "properties.vnetConfiguration", "dev", "null"); err != nil {
		return err
	}
	if v, err := b.moduleParam("modules/containerapps.bicep", "infrastructureSubnetId"); err != nil || v != "production ? network.outputs.infrastructureSubnetId : ''" {
		return fmt.Errorf("containerapps infrastructureSubnetId = %q (%v), want the network's subnet in production", v, err)
	}
	return nil
}

func checkBudget(b *bicep) error {
	bs, err := b.created("Microsoft.Consumption/budgets")
	if err != nil {
		return err
	}
	for path, expr := range map[string]string{"properties.category": "'Cost'", "properties.timeGrain": "'Monthly'", "properties.amount": "amount"} {
		if err := want(bs[0], path, expr); err != nil {
			return err
		}
	}
	n, err := get(bs[0], "properties.notifications")
	if err != nil {
		return err
	}
	if !strings.Contains(n, "contactRoles") || !strings.Contains(n, "contactGroups") {
		return fmt.Errorf("%v: notifications do not reach the Owners and the action group", bs[0])
	}
	for _, m := range b.all(infra.Module, "modules/budget.bicep") {
		if !strings.HasPrefix(m.Value, "if (production)") {
			return fmt.Errorf("%v: the budget is the production profile's", m)
		}
	}
	return nil
}
