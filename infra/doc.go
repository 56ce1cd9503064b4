// Package infra holds the project's Azure deployment and a reader and type
// checker for it.
//
// The deployment is the Bicep in infra/bicep, deployed with `azd up` (see
// infra/README.md). No Bicep compiler runs on the project's machines, so
// three gates stand in for it:
//
//   - infra/check-bicep-syntax.sh parses every template with the tree-sitter
//     Bicep grammar and fails on any syntax error;
//   - TypeData checks every resource body against the Bicep compiler's own
//     resource type data (bicep-types-az types.json, kept outside the
//     repository in ../shared/bicep-types): unknown and read-only
//     properties, literals of the wrong type or out of range, missing
//     required properties, unknown discriminators and unknown API versions,
//     the compiler's BCP035/036/037/073/078/081 class of errors, through
//     vars, parameters and both branches of a ternary, with the values
//     Azure accepts for open enums from OpenEnums;
//   - this package's tests read the template text and fail when a deployment
//     rule is broken: duplicate detection off, local auth on, a role broader
//     than the identity uses, an output the programs read missing, an API
//     version older than the pinned table, or a key or connection string
//     anywhere; CheckQuery reads each log alert's query and checks its
//     columns against the tables' documented schemas (LogTables), since the
//     alerts skip Azure's own query validation.
//
// The typed check also requires the duration properties DurationProperties
// lists to be ISO 8601 durations.
//
// The reader (ReadDir, Decls, ParseObject, ParseArray, References)
// understands the subset of Bicep the templates are written in: top-level
// param, var, resource, module and output declarations, and object and
// array literals written one item per line. It is not a Bicep parser and
// resolves no expressions; a template that leaves this subset is reported as
// an error rather than read wrongly.
//
// ReadDir reads files and TypeData reads type data; every other function is
// pure. All are safe for concurrent use.
package infra
