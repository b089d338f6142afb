"""gatewayd: the channel that carries a chat network's messages into sessions (SPEC section
18), Matrix first, behind a port another network can implement (`port`). It is a channel of
loopd as bxctl is (`client`), on the kit of `serving`; it holds no tool and no grant."""
