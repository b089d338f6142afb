"""loopd, the agent-loop daemon (SPEC section 8): the turn loop (`loop`), the inference
client (`infer`), the prompt cache's watch (`cache`), and the service that runs turns for
the channels of `loop.sock`."""
