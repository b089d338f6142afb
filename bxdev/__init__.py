"""The developers' tools, run from the checkout and never installed: `make run` (`run`, with
your own model or server checked by `own_model`), the real llama-server's build and launcher
(`llama_build`, `llama`), the recorder and the capture of `recordings/` (`recorder`,
`capture`), `make bench` (`bench`), and real processes read as they run (`processes`)."""
