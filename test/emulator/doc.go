// Package emulator holds the configuration for running the project against
// the official Azure Service Bus and Cosmos DB emulators with Docker
// (docker-compose.yaml, Config.json), and reads and checks the Service Bus
// emulator's Config.json.
//
// The tests in this directory that need no Docker run with plain `go test`:
// they check that Config.json stays inside the emulator's documented limits
// and agrees with the queue that infra/bicep deploys to Azure. Tests that talk
// to running emulators carry the build tag `emulator` and run with
// `go test -tags emulator ./test/emulator/...` after `docker compose up`
// (see README.md beside this file).
package emulator
