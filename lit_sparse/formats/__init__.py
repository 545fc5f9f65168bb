"""The model's folder format: ``pretrained`` (the folder and its checks), ``stock`` (Llama /
Mistral layouts), ``remote`` (remote-code files), ``transformers_files`` and ``gguf``. It
takes the model or its class as an argument and never imports the network."""
