_Solution = BucketedDDP


class BucketedDDP(_Solution):
    def finish_gradient_synchronization(self):
        super().finish_gradient_synchronization()
        # Mistake: writes back the all-reduced sum, not the average
        with torch.no_grad():
            for p in self.params:
                p.grad.mul_(dist.get_world_size())
