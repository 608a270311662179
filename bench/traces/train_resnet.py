"""A small ResNet-style conv net (basic residual blocks, batch norm,
strided stages), SGD with momentum, 3 training steps on 64x64 images."""
import torch
from torch import nn

from capture_common import phase, seed_everything, train

BATCH, CLASSES = 32, 100


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip = nn.Sequential()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                      nn.BatchNorm2d(cout))

    def forward(self, x):
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(y)) + self.skip(x))


class ResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32),
                                  nn.ReLU())
        stages, cin = [], 32
        for cout, stride in ((32, 1), (64, 2), (128, 2), (256, 2)):
            stages += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
            cin = cout
        self.stages = nn.Sequential(*stages)
        self.head = nn.Linear(cin, CLASSES)

    def forward(self, x):
        x = self.stages(self.stem(x))
        return self.head(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def main():
    seed_everything(2)
    phase("init")
    model = ResNet()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)

    def make_batch():
        return torch.randn(BATCH, 3, 64, 64), torch.randint(0, CLASSES, (BATCH,))

    def loss_of(m, batch):
        images, labels = batch
        return nn.functional.cross_entropy(m(images), labels)

    train(model, optimizer, make_batch, loss_of)


if __name__ == "__main__":
    main()
