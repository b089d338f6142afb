"""MCP servers kept by brokerd (SPEC section 16). Nothing here imports the `mcp` SDK at
the package's import: `server` and `wire` do, when a server is configured."""
