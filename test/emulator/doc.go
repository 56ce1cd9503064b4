// Package emulator holds the configuration for running the project against
// the official Azure Service Bus and Cosmos DB emulators with Docker
// (docker-compose.yaml, Config.json), and reads and checks the Service Bus
// emulator's Config.json. It also holds what the integration tests use to
// wait for the emulators to be ready (WaitReady, HTTPHealthProbe,
// CosmosProbe) and the SQL Server password policy that .env.example must
// meet (CheckSAPassword).
//
// The tests in this directory that need no Docker run with plain `go test`:
// they check that Config.json stays inside the emulator's documented limits
// and agrees with the queue that infra/bicep deploys to Azure. Tests that talk
// to running emulators carry the build tag `emulator` and run with
// `go test -tags emulator ./test/emulator/...` after `docker compose up`
// (see README.md beside this file).
package emulator
