_Solution = FSDP


class FSDP(_Solution):
    def __init__(self, module, process_group=None):
        # Mistake: every nn.Linear is rebuilt as a unit whose shard is created trainable
        # (requires_grad=True), the frozen layer's too, so the frozen layer trains
        for m in module.modules():
            if isinstance(m, nn.Linear):
                for t in m.parameters(recurse=False):
                    t.requires_grad_(True)
        super().__init__(module, process_group)
