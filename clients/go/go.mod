module github.com/berth-engine/berth/clients/go

go 1.22
