//go:build tools

// Package tools pins h2spec, the HTTP/2 conformance suite that
// crates/sluice-proxy/tests/h2spec_suite.rs runs against Sluice, and its dependencies
// (go.mod, go.sum); install.sh builds it.
package tools

import _ "github.com/summerwind/h2spec/cmd/h2spec"
