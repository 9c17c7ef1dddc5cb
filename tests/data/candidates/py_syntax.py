class ModelNew(nn.Module)
    pass
