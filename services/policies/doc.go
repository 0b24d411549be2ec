// Package policies owns approval policies: which first intents of a
// namespace must wait for people's approval. A policy matches tools by
// pattern and, for those, a CEL condition over the intent; it says how many
// distinct people must approve and when the approval escalates and
// expires. Every change writes a new version, and versions stay readable
// after a delete, for the actions a version caught. The ledger asks
// Service.Require for each new key's first intent, before it writes;
// compiled programs are cached by policy version, and every evaluation runs
// under a cost and a time bound (cel.go) that covers regular expressions
// (regex.go) and operators on params (cost.go).
package policies
