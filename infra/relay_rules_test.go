package infra_test

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/idempotent-consumer/sbcosmos/infra"
)

// relayRules are the rules of the relay's container app that the worker's
// do not cover, and of the containers and roles that give each identity its
// own containers.
var relayRules = []rule{
	{
		name:  "the relay and each subscriber use the containers their data roles are scoped to",
		check: bicepRule(checkOwnContainers),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "              value: cosmosShippingContainerName\n", "              value: cosmosContainerName\n"},
			{bicepDir + "modules/containerapps.bicep", "              value: cosmosLeasesContainerName\n            }\n            {\n              name: 'LOG_FORMAT'", "              value: cosmosContainerName\n            }\n            {\n              name: 'LOG_FORMAT'"},
			{mainFile, "    cosmosLoyaltyContainerName: cosmos.outputs.loyaltyContainerName\n", "    cosmosLoyaltyContainerName: cosmos.outputs.containerName\n"},
		},
	},
	{
		name:  "resource loops under the Cosmos DB account deploy one element at a time",
		check: checkCosmosLoops,
		mutations: []mutation{
			{bicepDir + "modules/cosmos.bicep", "@batchSize(1)\n", ""},
		},
	},
	{
		name:  "the relay serves its health on the health port and has startup, liveness and readiness probes there",
		check: bicepRule(checkRelayProbes),
		mutations: []mutation{
			{bicepDir + "modules/containerapps.bicep", "              name: 'RELAY_HEALTH_ADDR'\n              value: ':${healthPort}'\n", "              name: 'RELAY_HEALTH_ADDR'\n              value: '127.0.0.1:${healthPort}'\n"},
			{bicepDir + "modules/containerapps.bicep", "          probes: relayExists ? workerProbes : []\n", ""},
			// The bootstrap image probed on the health port it does not serve:
			// the first provisioning's relay never becomes ready.
			{bicepDir + "modules/containerapps.bicep", "          probes: relayExists ? workerProbes : []\n", "          probes: workerProbes\n"},
		},
	},
}

// cosmosLoopRE finds each resource loop of cosmos.bicep and the decorator
// line before it, if any.
var cosmosLoopRE = regexp.MustCompile(`(?m)^(@batchSize\(1\)\n)?resource (\w+) '[^']+' = \[`)

// checkCosmosLoops requires every resource loop under the Cosmos DB account
// to create one element at a time (@batchSize(1)): the chain rule orders
// whole resources, and Cosmos DB refuses concurrent control-plane writes.
func checkCosmosLoops(r repo) error {
	for _, m := range cosmosLoopRE.FindAllStringSubmatch(r[bicepDir+"modules/cosmos.bicep"], -1) {
		if m[1] == "" {
			return fmt.Errorf("cosmos.bicep: resource loop %s has no @batchSize(1): its elements deploy at the same time, and Cosmos DB answers all but one with \"another operation is in progress\"", m[2])
		}
	}
	return nil
}

// checkOwnContainers requires the relay's COSMOS_CONTAINER to be the orders
// container and its COSMOS_LEASES_CONTAINER the leases container, and each
// subscriber's COSMOS_CONTAINER its own container, each wired in main.bicep
// to the cosmos module's output of that container: the containers
// cosmos.bicep scopes their data roles to.
func checkOwnContainers(b *bicep) error {
	for _, w := range []struct {
		service, env, param, output string
	}{
		{"relay", "COSMOS_CONTAINER", "cosmosContainerName", "cosmos.outputs.containerName"},
		{"relay", "COSMOS_LEASES_CONTAINER", "cosmosLeasesContainerName", "cosmos.outputs.leasesContainerName"},
		{"loyalty", "COSMOS_CONTAINER", "cosmosLoyaltyContainerName", "cosmos.outputs.loyaltyContainerName"},
		{"shipping", "COSMOS_CONTAINER", "cosmosShippingContainerName", "cosmos.outputs.shippingContainerName"},
	} {
		app, err := serviceResource(b, "Microsoft.App/containerApps", w.service)
		if err != nil {
			return err
		}
		env, err := containerEnv(app)
		if err != nil {
			return err
		}
		if env[w.env] != w.param {
			return fmt.Errorf("%v: %s = %s, want %s: the container its data role is scoped to", app, w.env, env[w.env], w.param)
		}
		v, err := b.moduleParam("modules/containerapps.bicep", w.param)
		if err != nil {
			return err
		}
		if v != w.output {
			return fmt.Errorf("main.bicep passes %s = %s to the container apps, want %s", w.param, v, w.output)
		}
	}
	return nil
}

// checkRelayProbes checks that the relay listens on every interface at
// healthPort (RELAY_HEALTH_ADDR) and that its container has the three
// probes on the paths orderrelay serves once it runs its deployed image.
func checkRelayProbes(b *bicep) error {
	const file = bicepDir + "modules/containerapps.bicep"
	app, err := serviceResource(b, "Microsoft.App/containerApps", "relay")
	if err != nil {
		return err
	}
	env, err := containerEnv(app)
	if err != nil {
		return err
	}
	if env["RELAY_HEALTH_ADDR"] != "':${healthPort}'" {
		return fmt.Errorf("%v: RELAY_HEALTH_ADDR = %s, want ':${healthPort}' (all interfaces: the probes come from outside the container)", app, env["RELAY_HEALTH_ADDR"])
	}
	cs, _ := get(app, "properties.template.containers")
	containers, err := infra.ParseArray(cs)
	if err != nil || len(containers) != 1 {
		return fmt.Errorf("%v: want one container (%v)", app, err)
	}
	probes, ok := infra.Lookup(containers[0], "probes")
	if !ok {
		return fmt.Errorf("%v: container has no probes: orderrelay serves /startupz, /livez and /readyz on RELAY_HEALTH_ADDR", app)
	}
	// The bootstrap image (port 80, none of the health paths) gets no
	// probes; the deployed image gets them. The relay is the one app with
	// a replica from the first provisioning on, so probes on the bootstrap
	// image would keep that revision from ever becoming ready.
	cond, deployed, bootstrap, isTernary := infra.SplitTernary(probes)
	if !isTernary || cond != "relayExists" || bootstrap != "[]" {
		return fmt.Errorf("%v: probes = %s, want relayExists ? <probes> : []: the first provisioning runs the bootstrap image, which serves port 80 and no health path", app, probes)
	}
	probes = deployed
	if v, ok := b.find(file, infra.Var, probes); ok {
		probes = v.Value
	}
	items, err := infra.ParseArray(probes)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, p := range items {
		typ, _ := infra.Lookup(p, "type")
		typ = strings.Trim(typ, "'")
		wantPath, ok := healthPaths[typ]
		if !ok || seen[typ] {
			return fmt.Errorf("%v: probe type %s unknown or repeated", app, typ)
		}
		seen[typ] = true
		if v, _ := infra.Lookup(p, "httpGet.path"); v != wantPath {
			return fmt.Errorf("%v: %s probe path %s, want %s", app, typ, v, wantPath)
		}
		if v, _ := infra.Lookup(p, "httpGet.port"); v != "healthPort" {
			return fmt.Errorf("%v: %s probe port %s, want healthPort", app, typ, v)
		}
	}
	if len(seen) != 3 {
		return fmt.Errorf("%v: probes %v, want Startup, Liveness and Readiness", app, seen)
	}
	return nil
}
