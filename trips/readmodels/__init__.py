"""Read models: one shape per resource (trip, day) that REST and MCP only trim and floor."""
