"""The TypeScript MCP clients (the SDK 1.x client script, the Inspector CLI) and their shared test scene."""
